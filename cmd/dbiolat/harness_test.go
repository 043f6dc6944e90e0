package main

// The harness of the end-to-end tests: the real binary, the real kernel
// programs, a real PostgreSQL (Debian's 15, or 16 to 18 from npm) started
// by each test in a temp directory. The tests are grouped by the promise
// they check, one file per layer or command: queries_test.go (which
// queries are seen), fs_test.go, block_test.go, waterfall_test.go,
// aio_test.go, record_test.go, bench_test.go,
// html_test.go, demo_test.go, doctor_test.go, and the robustness files
// safety_test.go, lifecycle_test.go, overload_test.go.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/record"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

var binary string // built once by TestMain

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dbiolat-test-")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755) // the unprivileged-user case runs it too
	binary = filepath.Join(dir, "dbiolat")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build: static, and able to drop capabilities
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building dbiolat: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sideBySide runs a test beside the other such tests, once every other
// test has run (t.Parallel; make test's -parallel says how many at
// once): for a test whose traces name their server (--pid, --pgdata,
// --datadir), which counts (against pg_stat_statements, Com_*) rather
// than times, drops no page cache, and needs neither the machine nor
// the kernel's state to itself (no other server running, the programs
// loaded, the BPF run-time statistics). The suite's time is counted:
// CI has thirty minutes.
func sideBySide(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// trace is a running `dbiolat ... --json`.
type trace struct {
	cmd       *exec.Cmd
	stdout    bytes.Buffer
	stderr    lockedBuffer
	processes []model.Process // filled by stop
	mayLose   bool            // the test itself checks the drops
}

// lockedBuffer is a trace's stderr: written as it comes, read by the test
// meanwhile.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.WriteString(string(p))
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startTrace runs dbiolat and returns once its probes are attached.
func startTrace(t *testing.T, args ...string) *trace {
	t.Helper()
	return startTraceCmd(t, exec.Command(binary, args...))
}

// startTraceCmd runs a command that runs dbiolat (through setpriv, say).
func startTraceCmd(t *testing.T, cmd *exec.Cmd) *trace {
	t.Helper()
	args := cmd.Args
	tr := &trace{cmd: cmd}
	tr.cmd.Stdout = &tr.stdout
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	tr.cmd.Stderr = pw
	if err := tr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		ok := false
		for sc.Scan() {
			tr.stderr.WriteString(sc.Text() + "\n")
			if !ok && strings.HasPrefix(sc.Text(), "Tracing ") {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			tr.cmd.Wait()
			t.Fatalf("dbiolat %v did not start: %s", args, tr.stderr.String())
		}
	case <-time.After(30 * time.Second):
		tr.cmd.Process.Kill()
		t.Fatalf("dbiolat %v did not attach in 30s", args)
	}
	t.Cleanup(func() { tr.cmd.Process.Kill() })
	return tr
}

// stop ends the trace with Ctrl-C and returns its JSON lines.
func (tr *trace) stop(t *testing.T) (queries []model.Query, intervals []model.Interval, sum model.Summary) {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // records still in the ring buffer are drained at exit anyway
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("dbiolat exited with %v: %s", err, tr.stderr.String())
	}
	gotSummary := false
	for _, line := range strings.Split(strings.TrimSpace(tr.stdout.String()), "\n") {
		if line == "" {
			continue
		}
		var head struct{ Type string }
		if err := json.Unmarshal([]byte(line), &head); err != nil {
			t.Fatalf("invalid JSON line %q: %v", line, err)
		}
		switch head.Type {
		case "query":
			var q model.Query
			mustUnmarshal(t, line, &q)
			queries = append(queries, q)
		case "interval":
			var iv model.Interval
			mustUnmarshal(t, line, &iv)
			intervals = append(intervals, iv)
		case "process":
			var p model.Process
			mustUnmarshal(t, line, &p)
			tr.processes = append(tr.processes, p)
		case "summary":
			mustUnmarshal(t, line, &sum)
			gotSummary = true
		default:
			t.Fatalf("unknown record type in %q", line)
		}
	}
	if !gotSummary {
		t.Fatalf("no summary object at the end of the output:\n%s", tr.stdout.String())
	}
	if sum.Drops.Lost() != 0 && !tr.mayLose {
		t.Errorf("records were lost: %+v", sum.Drops)
	}
	checkBlockTimeIsOwn(t, queries)
	checkReadsClassified(t, queries, tr.processes, sum.Hists)
	return queries, intervals, sum
}

// stopText ends a trace without --json with Ctrl-C and returns its output.
func (tr *trace) stopText(t *testing.T) string {
	t.Helper()
	time.Sleep(300 * time.Millisecond)
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("dbiolat exited with %v: %s", err, tr.stderr.String())
	}
	return tr.stdout.String()
}

// stopRecording ends a `dbiolat record` with Ctrl-C and opens what it wrote.
func (tr *trace) stopRecording(t *testing.T) *record.Recording {
	t.Helper()
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("dbiolat record exited with %v: %s", err, tr.stderr.String())
	}
	file := tr.cmd.Args[slices.Index(tr.cmd.Args, "-o")+1]
	return openRecording(t, file)
}

// openRecording opens a recording and checks what every recording keeps.
func openRecording(t *testing.T, file string) *record.Recording {
	t.Helper()
	r, err := record.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary == nil {
		t.Fatalf("%s has no summary", file)
	}
	checkReadsClassified(t, slices.Collect(r.Queries), r.Processes, r.Summary.Hists)
	return r
}

// countQueries counts a recording's queries as they stream from the file.
func countQueries(t *testing.T, r *record.Recording) int {
	t.Helper()
	n := 0
	for range r.Queries {
		n++
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustUnmarshal(t *testing.T, line string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(line), v); err != nil {
		t.Fatalf("decoding %q: %v", line, err)
	}
}

func matching(qs []model.Query, prefix string) []model.Query {
	var out []model.Query
	for _, q := range qs {
		if strings.HasPrefix(q.Query, prefix) {
			out = append(out, q)
		}
	}
	return out
}

func only(t *testing.T, qs []model.Query, prefix string, n int) []model.Query {
	t.Helper()
	m := matching(qs, prefix)
	if len(m) != n {
		t.Fatalf("want %d queries starting %q, got %d", n, prefix, len(m))
	}
	return m
}

func dropCaches(t *testing.T) {
	t.Helper()
	exec.Command("sync").Run()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		t.Fatal(err)
	}
}

// makeBigTable creates a table many times larger than shared_buffers (16MB).
func makeBigTable(t *testing.T, c *pgsandbox.Cluster) {
	psql(t, c, "CREATE TABLE big AS SELECT g AS id, repeat('x', 300) AS pad FROM generate_series(1, 400000) g; VACUUM ANALYZE big; CHECKPOINT")
}

var literalDigit = regexp.MustCompile(`(^|[^$0-9])[0-9]`) // a digit that is not part of $n

// traceQueries runs fn with slowlog attached to c and returns every query.
func traceQueries(t *testing.T, c *pgsandbox.Cluster, fn func()) []model.Query {
	t.Helper()
	tr := startTrace(t, "slowlog", "--fs", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
	fn()
	qs, _, _ := tr.stop(t)
	checkBoxesAddUp(t, qs)
	return qs
}

// checkBlockTimeIsOwn: a query shows block time only for block requests
// of its own (time spent waiting on someone else's is I/O wait), in
// every record of every test.
func checkBlockTimeIsOwn(t *testing.T, qs []model.Query) {
	t.Helper()
	for _, q := range qs {
		if q.BlkNs > 0 && q.BlkCount == 0 || q.BlkNs > q.QueryNs {
			t.Errorf("%q: block time %d ns with %d block requests, query %d ns", q.Query, q.BlkNs, q.BlkCount, q.QueryNs)
		}
	}
}

// checkBoxesAddUp: every millisecond of a query is in exactly one box.
func checkBoxesAddUp(t *testing.T, qs []model.Query) {
	t.Helper()
	for _, q := range qs {
		sum := q.Accounted() + q.UnaccountedNs
		if q.QueryNs > 0 && (float64(q.UnaccountedNs) > 0.05*float64(q.QueryNs) || float64(sum) > 1.05*float64(q.QueryNs)) {
			t.Errorf("boxes of %q: cpu %d runq %d io %d lock %d lwlock %d other %d unaccounted %d, query %d ns",
				q.Query, q.CPUNs, q.RunqNs, q.IOWaitNs, q.LockNs, q.LWLockNs, q.OtherWaitNs, q.UnaccountedNs, q.QueryNs)
		}
	}
}

// checkReadsClassified: every file-system read is a page-cache hit or a
// miss, exactly once (fsio.bpf.c), in every query and process record and
// in the histograms of a finished trace (read after it detached, so that
// no read is between one histogram and the next).
func checkReadsClassified(t *testing.T, qs []model.Query, ps []model.Process, hs model.Hists) {
	t.Helper()
	check := func(what string, f *model.FSTotals) {
		if f.FSReadHitCount+f.FSReadMissCount != f.FSReadCount || f.FSReadHitNs+f.FSReadMissNs != f.FSReadNs {
			t.Errorf("%s: %d reads in %d ns, but %d hits in %d ns + %d misses in %d ns", what, f.FSReadCount, f.FSReadNs,
				f.FSReadHitCount, f.FSReadHitNs, f.FSReadMissCount, f.FSReadMissNs)
		}
	}
	for _, q := range qs {
		check(fmt.Sprintf("query %.60q", q.Query), &q.FSTotals)
	}
	for _, p := range ps {
		check(fmt.Sprintf("%s %d", p.Role, p.PID), &p.FSTotals)
	}
	if r := hs["fs_read"]; r != nil {
		hit, miss := cmp.Or(hs["fs_read_hit"], &hist.Hist{}), cmp.Or(hs["fs_read_miss"], &hist.Hist{})
		if hit.Count+miss.Count != r.Count || hit.Sum+miss.Sum != r.Sum {
			t.Errorf("histograms: %d reads in %d ns, but %d hits in %d ns + %d misses in %d ns", r.Count, r.Sum,
				hit.Count, hit.Sum, miss.Count, miss.Sum)
		}
	}
}

func ms(ns uint64) float64 { return float64(ns) / 1e6 }

// throttleReads puts the instance in a cgroup v1 blkio group that limits
// reads from the device under its data directory to bps.
func throttleReads(t *testing.T, c *pgsandbox.Cluster, bps int) {
	t.Helper()
	dir := blkioGroup(t, c.DataDir(), map[string]int{"read_bps_device": bps})
	// New backends are forked by the postmaster: they inherit its group.
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(c.PostmasterPID())), 0); err != nil {
		t.Fatal(err)
	}
}

// blkioGroup makes a cgroup v1 blkio group with throttle limits (by file:
// "read_iops_device": 1000) on the disk under path, removed at the end of
// the test, and returns its directory.
func blkioGroup(t *testing.T, path string, limits map[string]int) string {
	t.Helper()
	root := "/sys/fs/cgroup/blkio"
	if _, err := os.Stat(filepath.Join(root, "blkio.throttle.read_bps_device")); err != nil {
		t.Fatalf("cgroup v1 blkio throttling is not available: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	dev := wholeDisk(t, uint64(st.Dev))
	dir := filepath.Join(root, fmt.Sprintf("dbiolat-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pids, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, pid := range strings.Fields(string(pids)) {
			os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(pid), 0)
		}
		os.Remove(dir)
	})
	for file, limit := range limits {
		if err := os.WriteFile(filepath.Join(dir, "blkio.throttle."+file), []byte(fmt.Sprintf("%s %d", dev, limit)), 0); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// wholeDisk names the disk holding a partition's dev_t as "MAJ:MIN".
func wholeDisk(t *testing.T, dev uint64) string {
	major, minor := (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff
	link, err := filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/block/%d:%d", major, minor))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(link, "partition")); err == nil {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(link), "dev"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d:%d", major, minor)
}

// wantOneSentence runs cmd and checks that it fails with one line on
// stderr that says want, and no stack trace.
func wantOneSentence(t *testing.T, cmd *exec.Cmd, want string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	if err == nil {
		t.Fatalf("exit 0, want failure; stderr %q", msg)
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("want one line, got:\n%s", msg)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("stderr %q does not say %q", msg, want)
	}
	if strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine") {
		t.Errorf("stack trace in output: %s", msg)
	}
}

// pgCopy makes a PostgreSQL installation of its own, in a tree that
// mirrors /usr so that the server finds its share and lib directories,
// and returns its bin directory. Its server binary can then be replaced
// under a running server; without USDT it is as a build without
// --enable-dtrace: the copy lacks the .note.stapsdt section.
func pgCopy(t *testing.T, withUSDT bool) string {
	t.Helper()
	testenv.NeedRoot(t)
	src, err := pgsandbox.InstalledBinDir() // e.g. /usr/lib/postgresql/15/bin
	if err != nil {
		t.Fatal(err)
	}
	root := reachableTempDir(t, "dbiolat-nousdt-") // the postgres user runs from it
	version := filepath.Base(filepath.Dir(src))
	bin := filepath.Join(root, src)
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, link := range [][2]string{
		{filepath.Join(filepath.Dir(src), "lib"), filepath.Join(root, filepath.Dir(src), "lib")},
		{filepath.Join("/usr/share/postgresql", version), filepath.Join(root, "usr/share/postgresql", version)},
	} {
		os.MkdirAll(filepath.Dir(link[1]), 0o755)
		if err := os.Symlink(link[0], link[1]); err != nil {
			t.Fatal(err)
		}
	}
	// Copies, not links: each finds the others next to its own path.
	for _, name := range []string{"initdb", "pg_ctl", "psql", "pgbench"} {
		if out, err := exec.Command("cp", filepath.Join(src, name), bin).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	strip := []string{"--remove-section=.note.stapsdt"}
	if withUSDT {
		strip = nil
	}
	if out, err := exec.Command("llvm-objcopy", append(strip, filepath.Join(src, "postgres"), filepath.Join(bin, "postgres"))...).CombinedOutput(); err != nil {
		t.Fatalf("llvm-objcopy: %v: %s", err, out)
	}
	return bin
}

// pgSession is one psql session the test talks to statement by statement:
// a backend that lives across statements, whose PID the test can watch.
type pgSession struct {
	in  io.WriteCloser
	out *bufio.Reader
}

// openSession starts psql on database postgres; it ends with the test.
func openSession(t *testing.T, c *pgsandbox.Cluster) *pgSession {
	t.Helper()
	return openSessionEnv(t, c, nil)
}

// openSessionEnv is openSession with libpq settings added to psql's
// environment ("PGHOST=127.0.0.1", "PGSSLMODE=require").
func openSessionEnv(t *testing.T, c *pgsandbox.Cluster, env []string) *pgSession {
	t.Helper()
	cmd := c.PsqlCmd(context.Background(), "postgres", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1")
	cmd.Env = append(cmd.Env, env...)
	in, out := startClient(t, cmd)
	return &pgSession{in: in, out: bufio.NewReader(out)}
}

// startClient starts a database client the test talks to through its
// standard input and output; it ends (its input closed) with the test.
func startClient(t *testing.T, cmd *exec.Cmd) (io.WriteCloser, io.Reader) {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	return in, out
}

// run sends SQL and returns its output, once psql has finished it.
func (s *pgSession) run(t *testing.T, sql string) string {
	t.Helper()
	const done = "--dbiolat-test-done--"
	sql = strings.TrimRight(sql, "; \n") + ";" // a statement psql sends before the echo
	if _, err := io.WriteString(s.in, sql+"\n\\echo "+done+"\n"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for {
		line, err := s.out.ReadString('\n')
		if err != nil {
			t.Fatalf("psql ended: %v (output so far %q)", err, out.String())
		}
		if strings.TrimSpace(line) == done {
			return strings.TrimSpace(out.String())
		}
		out.WriteString(line)
	}
}

// reachableTempDir is a temporary directory other users can enter (the
// servers run as postgres; t.TempDir's are 0700), removed at the end.
func reachableTempDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	return dir
}
