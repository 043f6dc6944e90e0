package main

// Robustness: bad input of every kind gets one plain sentence and a
// non-zero exit; the kernel and file system faults are made for real (a
// mount namespace without BTF or tracefs, a full file system, a server
// binary without USDT probes); and least privilege.

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/record"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// recordings writes the recording files of the bad-input cases: a good
// one, and the ways one goes wrong.
func recordings(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	write := func(name string, version string) {
		w, err := record.Create(path(name), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 200; i++ {
			w.Query(&model.Query{Statements: 1, TS: time.Now(), Query: fmt.Sprintf("SELECT $1 FROM t%d", i), Fingerprint: fmt.Sprint(i), QueryNs: 1000})
		}
		w.Summary(&model.Summary{})
		if version != "" {
			w.Meta(map[string]string{"version": version})
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write("good", "")
	write("newer", "99")
	good, err := os.ReadFile(path("good"))
	if err != nil {
		t.Fatal(err)
	}
	garbled := bytes.Clone(good)
	for i := 4096; i < len(garbled); i += 7 {
		garbled[i] ^= 0x5a
	}
	db, err := sql.Open("sqlite", path("foreign-sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE meta (k TEXT, v TEXT); INSERT INTO meta VALUES ('format', 'other')"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for name, b := range map[string][]byte{
		"truncated": good[:len(good)/3],
		"garbled":   garbled,
		"empty":     nil,
		"text":      []byte("hello, I am not a recording\n"),
	} {
		if err := os.WriteFile(path(name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"missing": path("missing")}
	for _, name := range []string{"good", "newer", "truncated", "garbled", "empty", "text", "foreign-sqlite"} {
		files[name] = path(name)
	}
	return files
}

// Bad input: one clear sentence and a non-zero exit, never a panic.
func TestBadInputGivesOneSentence(t *testing.T) {
	notPG := exec.Command("sleep", "30")
	if err := notPG.Start(); err != nil {
		t.Fatal(err)
	}
	defer notPG.Process.Kill()
	rec := recordings(t)
	const notARecording = "is not a readable dbiolat recording"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no such pid", []string{"slowlog", "--pid", "999999999"}, "no process has PID 999999999"},
		{"not a database", []string{"slowlog", "--pid", fmt.Sprint(notPG.Process.Pid)}, "is neither PostgreSQL nor MySQL or MariaDB"},
		{"bad pgdata", []string{"hist", "--pgdata", "/nonexistent"}, "no PostgreSQL is running on /nonexistent"},
		{"bad duration", []string{"slowlog", "--duration", "soon"}, "invalid value"},
		{"unknown flag", []string{"iops", "--frobnicate"}, "flag provided but not defined"},
		{"bad interval", []string{"iops", "zero"}, "not a positive number"},
		{"unknown command", []string{"frob"}, "unknown command"},
		{"record without output", []string{"record", "--duration", "1s"}, "say where to write the recording with -o FILE"},
		{"negative interval", []string{"record", "-o", "/tmp/never", "--interval", "-1s"}, "give a positive duration"},
		{"record output in a missing directory", []string{"record", "-o", "/nonexistent/dir/r.dbiolat"}, "cannot create the recording /nonexistent/dir/r.dbiolat"},
		{"record over an existing file", []string{"record", "-o", rec["good"]}, "file exists"},
		{"report without a file", []string{"report"}, "give one recording file"},
		{"report of a missing file", []string{"report", rec["missing"]}, "cannot open the recording"},
		{"report of a truncated recording", []string{"report", rec["truncated"]}, notARecording},
		{"report of a garbled recording", []string{"report", rec["garbled"]}, notARecording},
		{"report of an empty file", []string{"report", rec["empty"]}, notARecording},
		{"report of a text file", []string{"report", rec["text"]}, notARecording},
		{"report of another program's SQLite file", []string{"report", rec["foreign-sqlite"]}, notARecording},
		{"report of a newer recording", []string{"report", rec["newer"]}, "is a version 99 recording"},
		{"report HTML into a missing directory", []string{"report", rec["good"], "--html", "/nonexistent/dir/r.html"}, "cannot write /nonexistent/dir/r.html"},
		{"compare with a bad recording", []string{"compare", rec["good"], rec["garbled"]}, notARecording},
		{"compare with one recording", []string{"compare", rec["good"]}, "two recordings"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// What to trace is looked up once dbiolat has the privileges to
			// trace: without them, they are the sentence (make unit runs this
			// as any user).
			if (slices.Contains(tc.args, "--pid") || slices.Contains(tc.args, "--pgdata")) && os.Geteuid() != 0 {
				tc.want = "dbiolat needs root or the capabilities"
			}
			wantOneSentence(t, exec.Command(binary, tc.args...), tc.want)
		})
	}
}

// The kernel and the machine missing what dbiolat needs, made for real
// in a private mount namespace: the message names what is missing.
func TestMissingKernelFeaturesGiveOneSentence(t *testing.T) {
	c := startPG(t, nil)
	pid := fmt.Sprint(c.PostmasterPID())
	t.Run("unprivileged", func(t *testing.T) {
		cmd := exec.Command(binary, "slowlog", "--duration", "1s", "--pid", pid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		wantOneSentence(t, cmd, "needs root or the capabilities")
	})
	t.Run("no BTF", func(t *testing.T) {
		wantOneSentence(t, inMountNamespace(t, "mount -t tmpfs none /sys/kernel/btf",
			binary, "slowlog", "--duration", "1s", "--pid", pid), "this kernel has no BTF")
	})
	t.Run("tracefs missing and not mountable", func(t *testing.T) {
		// Hide /sys/kernel but for BTF; a file where tracefs would be
		// mounted makes mounting it fail.
		setup := `d=$(mktemp -d) && mkdir $d/btf && mount --bind /sys/kernel/btf $d/btf &&
			mount -t tmpfs none /sys/kernel && mkdir /sys/kernel/btf && mount --bind $d/btf /sys/kernel/btf &&
			touch /sys/kernel/tracing`
		wantOneSentence(t, inMountNamespace(t, setup, binary, "slowlog", "--fs", "--duration", "1s", "--pid", pid),
			"tracefs is not mounted and mounting it failed")
	})
	t.Run("tracefs not mounted", func(t *testing.T) {
		// dbiolat mounts it itself (in this namespace only) and traces.
		cmd := inMountNamespace(t, "mount -t tmpfs none /sys/kernel/tracing",
			binary, "slowlog", "--fs", "--duration", "1s", "--pid", pid)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("with tracefs unmounted: %v\n%s", err, out)
		}
	})
}

// inMountNamespace returns a command that runs setup (shell) in a new,
// private mount namespace, then the command.
func inMountNamespace(t *testing.T, setup string, args ...string) *exec.Cmd {
	t.Helper()
	testenv.NeedRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatal("unshare (util-linux) is needed to fake a machine without BTF or tracefs")
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + a + "'"
	}
	return exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		"set -e; { "+setup+"; } >/dev/null; exec "+strings.Join(quoted, " "))
}

// A full file system under a recording: the recording fails in one
// sentence, and what it had written is still a readable recording.
func TestFullDiskKeepsTheRecording(t *testing.T) {
	c := startPG(t, nil)
	dir := t.TempDir()
	if err := syscall.Mount("none", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Fatal(err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	file := filepath.Join(dir, "r.dbiolat")
	cmd := exec.Command(binary, "record", "--min-query", "0", "--raw-sql", "--interval", "0.1s", "-o", file,
		"--pid", fmt.Sprint(c.PostmasterPID()))
	done := make(chan error, 1)
	go func() {
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, stderr.String())
		}
		done <- err
	}()
	// Long query texts fill 256 KiB quickly.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var err error
	for err == nil {
		select {
		case err = <-done:
		default:
			if ctx.Err() != nil {
				cmd.Process.Kill()
				t.Fatal("the recording did not fail on a full file system within 60s")
			}
			c.Psql(ctx, "postgres", "SELECT '"+strings.Repeat("x", 3000)+"' AS padding, "+fmt.Sprint(time.Now().UnixNano()))
		}
	}
	// The last line, after "Tracing ...": one sentence.
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if msg := lines[len(lines)-1]; !strings.HasPrefix(msg, "dbiolat record: writing the recording") || !strings.Contains(msg, "full") ||
		len(lines) != 2 || strings.Contains(msg, "goroutine") {
		t.Errorf("full disk: want one sentence after the Tracing line, got:\n%s", err)
	}
	r, rerr := record.Open(file)
	if rerr != nil {
		t.Fatalf("the recording cut short by a full disk does not open: %v", rerr)
	}
	kept := countQueries(t, r)
	if kept == 0 {
		t.Error("nothing of what was recorded before the disk filled up was kept")
	}
	t.Logf("kept %d queries before the file system filled up", kept)
}

// A server built without USDT probes: the default mode still sees every
// query, and names its waits from the backend's wait events, with no
// warning; the modes that need the probes say so in one sentence.
func TestServerWithoutUSDTProbes(t *testing.T) {
	bin := pgCopy(t, false)
	c, err := pgsandbox.Start(context.Background(), pgsandbox.Options{BinDir: bin})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	pid := fmt.Sprint(c.PostmasterPID())
	for _, args := range [][]string{{"--usdt"}, {"--buffers"}} {
		t.Run(args[0], func(t *testing.T) {
			wantOneSentence(t, exec.Command(binary, append([]string{"slowlog", "--duration", "1s", "--pid", pid}, args...)...),
				"built without --enable-dtrace")
		})
	}
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", pid)
	for i := 0; i < 5; i++ {
		if _, err := c.Psql(context.Background(), "postgres", "SELECT 'no probes', pg_sleep(0.01)"); err != nil {
			t.Fatal(err)
		}
	}
	qs, _, _ := tr.stop(t)
	if n := len(matching(qs, "SELECT $1, pg_sleep")); n != 5 {
		t.Errorf("saw %d of the 5 queries of a server without USDT probes", n)
	}
	if stderr := tr.stderr.String(); strings.Contains(stderr, "dbiolat: ") {
		t.Errorf("a warning, though the wait events name the waits:\n%s", stderr)
	}
	for _, q := range matching(qs, "SELECT $1, pg_sleep") {
		if q.Waits["Timeout/PgSleep"] == 0 {
			t.Errorf("pg_sleep's wait is not named: %v", q.Waits)
		}
	}
}

// Capabilities, by bit (linux/capability.h).
const (
	capSysPtrace = 19
	capSysAdmin  = 21
	capPerfmon   = 38
	capBPF       = 39
)

// capSets reads a process's capability sets from /proc: CapEff, CapPrm,
// CapBnd, CapAmb and CapInh, by name.
func capSets(t *testing.T, pid int) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		if name, v, ok := strings.Cut(line, ":\t"); ok && strings.HasPrefix(name, "Cap") {
			var n uint64
			fmt.Sscanf(v, "%x", &n)
			sets[name] = n
		}
	}
	return sets
}

// Least privilege: dbiolat traces as an unprivileged user given only
// CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE (the server is another user's),
// the USDT probes included: they are attached as uprobe_multi links,
// which need no CAP_SYS_ADMIN (perf-event uprobes do, on this kernel).
// Once attached, as root or not, it holds no CAP_BPF and nothing beyond
// what a running trace uses, in every set.
func TestLeastPrivilege(t *testing.T) {
	c := startPG(t, nil)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatal("setpriv (util-linux) is needed to run dbiolat with chosen capabilities")
	}
	const minimal = "-all,+bpf,+perfmon,+sys_ptrace"
	asNobody := []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=" + minimal, "--ambient-caps=" + minimal, "--bounding-set=" + minimal}
	allowed := uint64(1<<capPerfmon | 1<<capSysPtrace | 1<<capSysAdmin | 1<<1 | 1<<2) // DAC_OVERRIDE, DAC_READ_SEARCH
	for _, tc := range []struct {
		name   string
		prefix []string
		flags  []string
	}{
		{"root", nil, nil},
		{"nobody with CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE", asNobody, nil},
		{"nobody with CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, --usdt", asNobody, []string{"--usdt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(slices.Clone(tc.prefix), binary, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
			tr := startTraceCmd(t, exec.Command(args[0], append(args[1:], tc.flags...)...))
			caps := capSets(t, tr.cmd.Process.Pid)
			for _, set := range []string{"CapEff", "CapPrm", "CapAmb", "CapInh"} {
				if caps[set]&^allowed != 0 || caps[set]&(1<<capBPF) != 0 {
					t.Errorf("%s %#x after attaching: more than %#x", set, caps[set], allowed)
				}
			}
			if tc.prefix == nil && caps["CapBnd"]&^allowed != 0 {
				t.Errorf("bounding set %#x after attaching: more than %#x", caps["CapBnd"], allowed)
			}
			psql(t, c, "SELECT 'least privilege'")
			queries, _, _ := tr.stop(t)
			if n := len(matching(queries, "SELECT $1")); n != 1 {
				t.Errorf("saw %d queries, want 1", n)
			}
			if stderr := tr.stderr.String(); strings.Contains(stderr, "dbiolat: ") {
				t.Errorf("a warning:\n%s", stderr)
			}
		})
	}
}
