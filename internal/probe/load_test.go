package probe

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// Every program the tracer can attach loads and attaches on this kernel,
// all families at once and each on its own (the others stubbed out).
func TestOpenAttachesEverything(t *testing.T) {
	testenv.NeedRoot(t)
	for _, f := range []Families{All | Buffers | USDT | MySQLWire, PGWire, USDT, FS, Block, Sched, Buffers, MySQLWire} {
		tr, err := Open(f, EmitAll)
		if err != nil {
			t.Fatalf("%v: %v", f.Names(), err)
		}
		hs, err := Hooks(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := tr.linked(); n != len(hs) {
			t.Errorf("%v: %d links for %d hooks", f.Names(), n, len(hs))
		}
		// Paused, only process tracking stays; resumed, everything again.
		steady := 0
		for _, h := range hs {
			if strings.HasPrefix(h.Program, steadyPrefix) {
				steady++
			}
		}
		pausing, closing := time.Now(), monotonicNow()
		if err := tr.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: %d hooks came off in %v", f.Names(), len(hs)-steady, time.Since(pausing))
		var until uint64
		if err := tr.objs.TracedUntilNs.Get(&until); err != nil || until < closing {
			t.Errorf("paused, traced_until_ns %d (%v), want at least %d", until, err, closing)
		}
		if n := tr.linked(); n != steady || steady == 0 {
			t.Errorf("%v: paused, %d links; want the %d of process tracking", f.Names(), n, steady)
		}
		before := monotonicNow()
		if err := tr.Resume(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: and went on again in %v", f.Names(), time.Duration(monotonicNow()-before))
		if n := tr.linked(); n != len(hs) {
			t.Errorf("%v: resumed, %d links for %d hooks", f.Names(), n, len(hs))
		}
		var since uint64
		if err := tr.objs.TracedSinceNs.Get(&since); err != nil || since < before {
			t.Errorf("traced_since_ns %d (%v), want at least %d", since, err, before)
		}
		if err := tr.objs.TracedUntilNs.Get(&until); err != nil || until != 0 {
			t.Errorf("resumed, traced_until_ns %d (%v), want 0", until, err)
		}
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		if err := tr.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
}

// linked counts the hooks attached now.
func (t *Tracer) linked() int {
	n := 0
	for _, a := range t.attached {
		if a.link != nil {
			n++
		}
	}
	return n
}

// The kernel memory the maps take is fixed at load (every map preallocated
// and sized), but for the histograms per unit, which grow to a bound as
// processes do I/O: the two stay within the budget docs/overhead.md states.
func TestMapMemoryBudget(t *testing.T) {
	testenv.NeedRoot(t)
	const budget = 47 << 20
	tr, err := Open(All, EmitAll)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	n := tr.MapBytes()
	// A unit's histogram (568 bytes with its key and the kernel's
	// header) takes a 1 KiB block of the BPF allocator.
	growth := uint64(tr.objs.UnitHists.MaxEntries()) << 10
	t.Logf("BPF maps: %d bytes at load, %d more at most (budget %d)", n, growth, budget)
	if n == 0 || n+growth > budget {
		t.Errorf("BPF maps take %d bytes and up to %d more, want some and at most %d", n, growth, budget)
	}
}

// A dormant family costs nothing until woken: its programs are stubs, its
// hooks unattached. Woken, its programs are loaded into the maps loaded
// already (the tasks' storage the other families keep, the counters every
// summary reads), and its hooks attach.
func TestWakeLoadsIntoTheSameMaps(t *testing.T) {
	testenv.NeedRoot(t)
	tr, err := Load(Default, MySQLWire, EmitAll)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	before, _ := Hooks(Default)
	after, _ := Hooks(Default | MySQLWire)
	if tr.objs.MysqlSend.Type() != ebpf.SocketFilter || tr.linked() != len(before) {
		t.Fatalf("dormant: mysql_send is a %v, %d links for the %d hooks of the families attached", tr.objs.MysqlSend.Type(), tr.linked(), len(before))
	}
	if err := tr.Wake(MySQLWire); err != nil {
		t.Fatal(err)
	}
	if err := tr.Wake(MySQLWire); err != nil { // once is enough
		t.Fatal(err)
	}
	if tr.objs.MysqlSend.Type() != ebpf.Tracing || tr.linked() != len(after) || tr.Attached() != Default|MySQLWire {
		t.Fatalf("woken: mysql_send is a %v, %d links for %d hooks, families %v", tr.objs.MysqlSend.Type(), tr.linked(), len(after), tr.Attached().Names())
	}
	info, err := tr.objs.MysqlSend.Info()
	if err != nil {
		t.Fatal(err)
	}
	uses, _ := info.MapIDs()
	for name, m := range map[string]*ebpf.Map{"tasks": tr.objs.Tasks, "stats": tr.objs.Stats, "mysql_conns": tr.objs.MysqlConns} {
		mi, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := mi.ID()
		if !slices.Contains(uses, id) {
			t.Errorf("the woken mysql_send does not use the loaded %s (map %d; it uses %v)", name, id, uses)
		}
	}
}

// bench/overhead's serve-empty: with DBIOLAT_BENCH_EMPTY_PROGRAMS, every
// program returns at once, and all attach as they do with their work.
func TestEmptyPrograms(t *testing.T) {
	testenv.NeedRoot(t)
	emptyPrograms = true
	defer func() { emptyPrograms = false }()
	tr, err := Open(Default, EmitAll)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	hs, err := Hooks(Default)
	if err != nil {
		t.Fatal(err)
	}
	if n := tr.linked(); n != len(hs) {
		t.Errorf("%d links for %d hooks", n, len(hs))
	}
	for name, p := range map[string]*ebpf.Program{"pgwire_send": tr.objs.PgwireSend, "sched_switch": tr.objs.SchedSwitch, "blk_done": tr.objs.BlkDone} {
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		insns, err := info.Instructions()
		if err != nil {
			t.Fatal(err)
		}
		if len(insns) != 2 {
			t.Errorf("%s: %d instructions, want 2 (r0 = 0, exit)", name, len(insns))
		}
	}
}
