package probe

import (
	"slices"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

// Each program has somewhere to go: a kernel hook named by its section,
// a USDT site or a function (uprobe, uretprobe), or, for the self-test, a
// test run.
func TestEveryProgramAttaches(t *testing.T) {
	s, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	for name, ps := range s.Programs {
		_, hooked := hookOf(name, ps)
		switch {
		case hooked, ps.SectionName == "uprobe", ps.SectionName == "uretprobe",
			ps.SectionName == "syscall" && strings.HasPrefix(name, "selftest_"):
		default:
			t.Errorf("program %s in section %q attaches nowhere", name, ps.SectionName)
		}
	}
}

// The hooks are read from the section names: the default mode's are the
// socket, block, scheduler and process tracepoints, and no syscall.
func TestHooksFromSections(t *testing.T) {
	hs, err := Hooks(Default)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range hs {
		if h.Group != "" {
			t.Errorf("the default mode attaches a tracepoint %s: only BTF tracepoints are cheap enough", h)
		}
		names = append(names, h.Name)
	}
	got := strings.Join(names, ",")
	for _, want := range []string{"block_io_start", "block_io_done", "sched_switch", "sock_recv_length", "sched_process_fork"} {
		if !strings.Contains(got, want) {
			t.Errorf("default hooks %s lack %s", got, want)
		}
	}
	fs, err := Hooks(FS)
	if err != nil {
		t.Fatal(err)
	}
	// A syscall timed has its entry and its exit (read-ahead advice is
	// only counted: entries alone).
	enters := map[string]bool{}
	for _, h := range fs {
		if name, ok := strings.CutPrefix(h.Name, "sys_enter_"); ok && h.Group == "syscalls" {
			enters[name] = true
		}
	}
	exits := 0
	for _, h := range fs {
		if name, ok := strings.CutPrefix(h.Name, "sys_exit_"); ok && h.Group == "syscalls" {
			exits++
			if !enters[name] {
				t.Errorf("fs family: %s has an exit and no entry", name)
			}
		}
	}
	if exits == 0 {
		t.Errorf("fs family times no syscall: %v", fs)
	}
}

// docs/numbers.md lists the syscalls --fs times: those of the programs'
// sections, so the list cannot drift from the code.
func TestDocListsTheTracedSyscalls(t *testing.T) {
	hs, err := Hooks(FS)
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, h := range hs {
		if name, ok := strings.CutPrefix(h.Name, "sys_enter_"); ok && h.Group == "syscalls" {
			calls = append(calls, name)
		}
	}
	slices.Sort(calls)
	calls = slices.Compact(calls) // read: the file system's, and the storage engine's /dev/fuse
	testenv.DocSection(t, "docs/numbers.md", "syscalls", "`"+strings.Join(calls, "`, `")+"`\n")
}
