package main

// End-to-end tests: the real binary, the real kernel programs, a real
// PostgreSQL 15 started by the test in a temp directory.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

func startPG(t *testing.T, settings map[string]string) *pgsandbox.Cluster {
	t.Helper()
	testenv.NeedRoot(t)
	c, err := pgsandbox.Start(context.Background(), pgsandbox.Options{Settings: settings})
	if err != nil {
		if err == pgsandbox.ErrNotInstalled && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

func psql(t *testing.T, c *pgsandbox.Cluster, sql string) string {
	t.Helper()
	out, err := c.Psql(context.Background(), "postgres", sql)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// trace is a running `dbiolat ... --json`.
type trace struct {
	cmd       *exec.Cmd
	stdout    bytes.Buffer
	stderr    bytes.Buffer
	processes []model.Process // filled by stop
	mayLose   bool            // the test itself checks the drops
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
	return queries, intervals, sum
}

// stopRecording ends a `dbiolat record` with Ctrl-C and opens what it wrote.
func (tr *trace) stopRecording(t *testing.T) *record.Recording {
	t.Helper()
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("dbiolat record exited with %v: %s", err, tr.stderr.String())
	}
	file := tr.cmd.Args[slices.Index(tr.cmd.Args, "-o")+1]
	r, err := record.Open(file)
	if err != nil {
		t.Fatal(err)
	}
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

var ioTimingRe = regexp.MustCompile(`I/O Timings: shared read=([0-9.]+)`)

// A cold full scan: our file system read time agrees with PostgreSQL's own
// track_io_timing for the same query, and the block layer saw the reads.
// Warm, the same scan causes (almost) no block requests.
func TestColdAndWarmScanMatchTrackIOTiming(t *testing.T) {
	c := startPG(t, nil)
	makeBigTable(t, c)
	size, _ := strconv.Atoi(psql(t, c, "SELECT pg_relation_size('big')"))
	if size < 8*16<<20 {
		t.Fatalf("table is %d bytes, want several times shared_buffers", size)
	}
	const scan = "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) SELECT count(*) FROM big WHERE id >= 0"

	tr := startTrace(t, "slowlog", "--fs", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
	dropCaches(t)
	cold := psql(t, c, scan)
	warm := psql(t, c, scan)
	queries, _, _ := tr.stop(t)

	scans := matching(queries, "EXPLAIN")
	if len(scans) != 2 {
		t.Fatalf("want 2 scan records, got %d: %+v", len(scans), scans)
	}
	m := ioTimingRe.FindStringSubmatch(cold)
	if m == nil {
		t.Fatalf("no I/O timing in the cold plan:\n%s", cold)
	}
	pgMs, _ := strconv.ParseFloat(m[1], 64)
	q := scans[0]
	oursMs := float64(q.FSReadNs) / 1e6
	t.Logf("cold: PostgreSQL I/O read %.1f ms, dbiolat fs read %.1f ms in %d reads, blk %d requests busy %.1f ms, query %.1f ms",
		pgMs, oursMs, q.FSReadCount, q.BlkCount, float64(q.BlkNs)/1e6, float64(q.QueryNs)/1e6)
	// PostgreSQL's clock reads sit outside the syscall, ours inside it: the
	// syscall's entry and exit, with our tracepoint programs, fall in its
	// window and not in ours. That is a fixed cost per read (measured
	// here: 0.53-0.58 µs), so on a fast device, where a cold read takes a
	// few µs, it is more than 10%: allow 10% plus 1 µs a read.
	if slack := 0.10*pgMs + float64(q.FSReadCount)*1e-3; math.Abs(oursMs-pgMs) > slack {
		t.Errorf("fs read time %.1f ms is not within 10%% + 1 µs a read (%.1f ms) of track_io_timing %.1f ms", oursMs, slack, pgMs)
	}
	if q.BlkCount == 0 || q.BlkReadCount == 0 {
		t.Errorf("cold scan caused no block reads: %+v", q)
	}
	// Readahead requests stay in flight while the backend works on the
	// pages it has, so the block time may exceed the read time, never the query's.
	if q.BlkNs > q.QueryNs {
		t.Errorf("block time %d ns exceeds the query's %d ns", q.BlkNs, q.QueryNs)
	}
	if int(q.FSReadBytes) < size/2 {
		t.Errorf("read %d bytes of a %d-byte table", q.FSReadBytes, size)
	}

	w := scans[1]
	t.Logf("warm: fs read %d in %.1f ms, blk %d requests; plan: %s", w.FSReadCount, float64(w.FSReadNs)/1e6, w.BlkCount, strings.Fields(warm)[0])
	if w.BlkCount > 5 {
		t.Errorf("warm scan caused %d block requests, want near zero", w.BlkCount)
	}
	if w.FSReadCount == 0 {
		t.Errorf("warm scan shows no file system reads (they hit the page cache, but they happen)")
	}

	// The default mode, without --fs, runs nothing on file syscalls, yet
	// still has the query, its waterfall and the block requests under it.
	tr = startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
	dropCaches(t)
	psql(t, c, scan)
	queries, _, sum := tr.stop(t)
	scans = matching(queries, "EXPLAIN")
	if len(scans) != 1 {
		t.Fatalf("default mode: want 1 scan record, got %d", len(scans))
	}
	d := scans[0]
	t.Logf("default mode: query %.1f ms, cpu %.1f ms, io wait %.1f ms, blk %d requests busy %.1f ms; probes %v",
		float64(d.QueryNs)/1e6, float64(d.CPUNs)/1e6, float64(d.IOWaitNs)/1e6, d.BlkReadCount, float64(d.BlkNs)/1e6, sum.Traced)
	if !slices.Equal(sum.Traced, []string{"wire", "block", "sched"}) {
		t.Errorf("default mode traced %v, want wire, block, sched", sum.Traced)
	}
	if d.FSCount() != 0 {
		t.Errorf("default mode timed %d file system calls", d.FSCount())
	}
	if d.BlkReadCount == 0 || d.CPUNs == 0 {
		t.Errorf("default mode lost the block reads or the waterfall: %+v", d)
	}
}

// Every statement pgbench runs is reported exactly once, in agreement with
// pgbench's own count and pg_stat_statements, whichever protocol the
// client speaks: simple queries, the extended protocol with unnamed
// statements, or named prepared statements; and with --usdt, whose probes
// fire for simple queries only.
func TestPgbenchStatementsReportedOnce(t *testing.T) {
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		protocol string
		flags    []string
	}{{"simple", nil}, {"extended", nil}, {"prepared", nil}, {"simple", []string{"--usdt"}}} {
		t.Run(strings.Join(append([]string{tc.protocol}, tc.flags...), " "), func(t *testing.T) {
			psql(t, c, "SELECT pg_stat_statements_reset()")
			args := append([]string{"slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID())}, tc.flags...)
			tr := startTrace(t, args...)
			out, err := c.Pgbench(ctx, "postgres", "-n", "-M", tc.protocol, "-c", "2", "-t", "300")
			if err != nil {
				t.Fatal(err)
			}
			res, err := pgsandbox.ParsePgbench(out)
			if err != nil {
				t.Fatal(err)
			}
			queries, _, sum := tr.stop(t)
			checkPgbenchStatements(t, c, queries, res.Transactions, tc.protocol == "prepared")
			if sum.Drops.Of("wire_unseen") != 0 {
				t.Errorf("%d round trips began unseen", sum.Drops.Of("wire_unseen"))
			}
		})
	}
}

// checkPgbenchStatements checks the records of a TPC-B-like run: each
// statement once per transaction, as pg_stat_statements counted it, under
// one fingerprint, with the literals replaced. With prepared statements,
// pg_stat_statements counts BEGIN and END once per connection (2 here),
// not once per execution, so those two are checked against pgbench only.
func checkPgbenchStatements(t *testing.T, c *pgsandbox.Cluster, queries []model.Query, transactions int64, prepared bool) {
	t.Helper()
	pss := func(prefix string) int {
		n, err := strconv.Atoi(psql(t, c, fmt.Sprintf("SELECT coalesce(sum(calls),0) FROM pg_stat_statements WHERE query LIKE '%s%%'", prefix)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, stmt := range []string{"UPDATE pgbench_accounts", "UPDATE pgbench_tellers", "SELECT abalance", "INSERT INTO pgbench_history", "BEGIN", "END"} {
		ours := len(matching(queries, stmt))
		theirs := pss(stmt)
		t.Logf("%-28s dbiolat %d, pg_stat_statements %d, pgbench transactions %d", stmt, ours, theirs, transactions)
		utility := stmt == "BEGIN" || stmt == "END"
		if int64(ours) != transactions || ours != theirs && !(prepared && utility) {
			t.Errorf("%s: dbiolat reported %d, pgbench ran %d, pg_stat_statements counted %d", stmt, ours, transactions, theirs)
		}
	}
	fps := map[string]bool{}
	for _, q := range matching(queries, "UPDATE pgbench_accounts") {
		fps[q.Fingerprint] = true
		if q.Database != "postgres" || q.Role != "client backend" {
			t.Errorf("query attributed to database %q role %q", q.Database, q.Role)
		}
		if literalDigit.MatchString(q.Query) {
			t.Errorf("literal left in normalized query %q", q.Query)
		}
		if q.CPUNs == 0 || q.Accounted() > q.QueryNs+q.QueryNs/20 {
			t.Errorf("the waterfall does not add up: %d ns accounted of %d", q.Accounted(), q.QueryNs)
		}
	}
	if len(fps) != 1 {
		t.Errorf("UPDATE pgbench_accounts has %d fingerprints, want 1", len(fps))
	}
}

// Inserts with synchronous_commit=on: the committing backends sync the WAL,
// and their block writes are charged to them.
func TestCommitShowsSyncAndBlockWrites(t *testing.T) {
	c := startPG(t, map[string]string{"synchronous_commit": "on", "wal_sync_method": "fdatasync"})
	psql(t, c, "CREATE TABLE ins (id int, pad text)")
	tr := startTrace(t, "slowlog", "--fs", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
	script := filepath.Join(c.SocketDir(), "insert.sql")
	if err := os.WriteFile(script, []byte("INSERT INTO ins VALUES (1, repeat('y', 200));\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pgbench(context.Background(), "postgres", "-n", "-c", "2", "-t", "200", "-f", script); err != nil {
		t.Fatal(err)
	}
	queries, _, _ := tr.stop(t)
	ins := matching(queries, "INSERT INTO ins")
	if len(ins) != 400 {
		t.Fatalf("want 400 inserts, got %d", len(ins))
	}
	var syncs, syncNs, writes, blkWrites uint64
	for _, q := range ins {
		syncs += q.FSSyncCount
		syncNs += q.FSSyncNs
		writes += q.FSWriteCount
		blkWrites += q.BlkWriteCount
	}
	t.Logf("400 inserts: %d WAL writes, %d syncs (%.1f ms), %d block writes", writes, syncs, float64(syncNs)/1e6, blkWrites)
	// Group commit lets one backend's sync cover another's commit, and the
	// walwriter may flush first, so not every insert syncs, but most do.
	if syncs < 100 || syncNs == 0 {
		t.Errorf("only %d syncs for 400 synchronous commits", syncs)
	}
	if blkWrites == 0 {
		t.Errorf("no block writes charged to the committing backends")
	}
}

// A dd writing to the same disk during the trace is charged to no query:
// its requests appear as "other process" I/O, and their bytes match dd's.
func TestForeignIONotChargedToQueries(t *testing.T) {
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	psql(t, c, "SELECT count(*) FROM pgbench_accounts") // warm
	slow := startTrace(t, "slowlog", "--fs", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
	iops := startTrace(t, "iops", "--json", "--pid", fmt.Sprint(c.PostmasterPID()), "0.5")

	file := filepath.Join(os.TempDir(), fmt.Sprintf("dbiolat-dd-%d", os.Getpid()))
	defer os.Remove(file)
	const mb = 64
	dd := exec.Command("dd", "if=/dev/zero", "of="+file, "bs=1M", fmt.Sprint("count=", mb), "oflag=direct")
	if err := dd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pgbench(ctx, "postgres", "-n", "-S", "-c", "2", "-T", "3"); err != nil {
		t.Fatal(err)
	}
	if err := dd.Wait(); err != nil {
		t.Fatal(err)
	}
	queries, _, _ := slow.stop(t)
	_, intervals, _ := iops.stop(t)

	var blkBytes uint64
	for _, q := range queries {
		blkBytes += q.BlkBytes
	}
	var otherBytes float64
	for _, iv := range intervals {
		for _, r := range iv.Rates {
			if r.Layer == "blk" && r.Role == "other process" {
				otherBytes += r.WriteBytes * iv.Seconds
			}
		}
	}
	t.Logf("%d queries, their block bytes %d; other processes wrote %.1f MiB (dd wrote %d MiB)", len(queries), blkBytes, otherBytes/(1<<20), mb)
	if len(queries) < 100 {
		t.Errorf("only %d queries traced", len(queries))
	}
	if blkBytes > 1<<20 {
		t.Errorf("queries were charged %d block bytes while only dd wrote", blkBytes)
	}
	// Other processes on the machine may write too, so dd's bytes are a floor.
	if otherBytes < 0.98*mb*(1<<20) {
		t.Errorf("other-process block writes %.0f bytes, want at least dd's %d MiB", otherBytes, mb)
	}
}
