package main

// MariaDB's life beside a trace, as PostgreSQL's is in lifecycle_test.go:
// the server restarted (cleanly, or killed with SIGKILL and started
// again) under slowlog and serve, started after the trace began, started
// while serve waits for any server, restarted inside its pod's
// namespaces; and its data directory on a FUSE file system, whose daemon's
// work is the statements'. Every engine goes through one seam: what holds
// for PostgreSQL holds for MariaDB.

import (
	"fmt"
	"io"
	"net/http"
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

	dto "github.com/prometheus/client_model/go"

	"github.com/dbiolat/dbiolat/internal/container"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/mysandbox"
	"github.com/dbiolat/dbiolat/internal/mysql"
	"github.com/dbiolat/dbiolat/internal/postgres"
	"github.com/dbiolat/dbiolat/internal/sandbox"
	"github.com/dbiolat/dbiolat/internal/storage"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// markedSelects is a script of n statements "SELECT '<mark>', i", i from
// 0: each its own text under --raw-sql, each a Com_select on the server.
func markedSelects(mark string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "SELECT '%s', %d;\n", mark, i)
	}
	return b.String()
}

// mySQL runs a script on s through one mariadb client: one connection,
// its statements one after the other.
func mySQL(t *testing.T, s *mysandbox.Server, script string) string {
	t.Helper()
	out, err := s.SQL(mysqlContext(t), "", script)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// marked finds the records of markedSelects(mark, ...) by their i: the
// client sends each statement without its delimiter.
func marked(qs []model.Query, mark string) map[int][]model.Query {
	out := map[int][]model.Query{}
	for _, q := range qs {
		if rest, ok := strings.CutPrefix(q.Query, "SELECT '"+mark+"', "); ok {
			if i, err := strconv.Atoi(rest); err == nil {
				out[i] = append(out[i], q)
			}
		}
	}
	return out
}

// checkMarked checks that each of the n statements of markedSelects(mark,
// n) is one record, of the server's pid, data directory and (if port > 0)
// port, and returns how many were seen.
func checkMarked(t *testing.T, qs []model.Query, mark string, n, pid int, dataDir string, port int) int {
	t.Helper()
	m := marked(qs, mark)
	seen, wrong := 0, 0
	for i := range n {
		switch len(m[i]) {
		case 0:
			continue
		case 1:
		default:
			t.Errorf("%q statement %d has %d records", mark, i, len(m[i]))
		}
		seen++
		q := m[i][0]
		if q.Instance != pid || q.DataDir != dataDir || port > 0 && q.Port != port {
			if wrong++; wrong <= 3 {
				t.Errorf("%q statement %d is of instance %d, %s, port %d; want %d, %s, port %d", mark, i, q.Instance, q.DataDir, q.Port, pid, dataDir, port)
			}
		}
	}
	if seen != n {
		t.Errorf("%q: %d of %d statements seen", mark, seen, n)
	}
	return seen
}

// waitSays waits, a minute at most, for the trace's stderr to hold text,
// calling poke at each look (a statement sent meanwhile); false, and the
// test failed, if it did not. The test goes on, so that what was seen
// after is counted all the same.
func waitSays(t *testing.T, tr *trace, what, text string, poke func()) bool {
	t.Helper()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(tr.stderr.String(), text) {
			return true
		}
		if poke != nil {
			poke()
		}
	}
	t.Errorf("waited a minute for %s: stderr does not say %q:\n%s", what, text, tr.stderr.String())
	return false
}

// checkSaidInOrder: the trace said each text, in this order.
func checkSaidInOrder(t *testing.T, tr *trace, texts ...string) {
	t.Helper()
	stderr, at := tr.stderr.String(), 0
	for _, text := range texts {
		i := strings.Index(stderr[at:], text)
		if i < 0 {
			t.Errorf("the trace did not say %q (after %q):\n%s", text, stderr[:at], stderr)
			return
		}
		at += i + len(text)
	}
}

// freePort is a TCP port on the loopback nothing listens on now
// (sandbox.FreePort).
func freePort(t *testing.T) int {
	t.Helper()
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// MariaDB restarts under slowlog --pid (cleanly, or killed with SIGKILL
// and started again, InnoDB recovering): the trace says it exited, then
// that it is back under its new pid; from then on it sees every statement
// under the new server, as many SELECTs as the server counted.
func TestMariaDBRestartIsFollowed(t *testing.T) {
	sideBySide(t)
	for _, tc := range []struct {
		name string
		kill bool
	}{{"restart", false}, {"kill -9", true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := startMariaDB(t, nil)
			old := s.PID()
			tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--raw-sql", "--pid", fmt.Sprint(old))
			const before, after = 10, 100
			mySQL(t, s, markedSelects("before the restart", before))
			if err := s.Restart(mysqlContext(t), tc.kill); err != nil {
				t.Fatal(err)
			}
			pid := s.PID()
			exited := fmt.Sprintf("MariaDB pid %d (%s) has exited: waiting for it to come back", old, s.DataDir)
			back := fmt.Sprintf("MariaDB on %s is back as pid %d: tracing it", s.DataDir, pid)
			// Statements while the trace looks for the server (some may be
			// missed), then, once it says it is back, statements it must all see.
			looking := 0
			waitSays(t, tr, "the trace to find the restarted server", back, func() {
				mySQL(t, s, fmt.Sprintf("SELECT 'while looking', %d", looking))
				looking++
			})
			checkSaidInOrder(t, tr, exited, back)
			// The window: one client's 100 SELECTs between two readings
			// of the counters (each reading a SHOW STATUS, no SELECT).
			c0 := comCounters(t, s)
			mySQL(t, s, markedSelects("after the restart", after))
			c1 := comCounters(t, s)
			qs, _, _ := tr.stop(t)
			checkMarked(t, qs, "before the restart", before, old, s.DataDir, 0)
			seen := checkMarked(t, qs, "after the restart", after, pid, s.DataDir, 0)
			selects := c1["com_select"] - c0["com_select"]
			if n := len(matching(qs, "SELECT 'after the restart', ")); uint64(n) != selects || selects != after {
				t.Errorf("after the restart: %d records of the %d SELECTs sent; the server counted %d SELECTs (Com_select) meanwhile", n, after, selects)
			}
			t.Logf("mariadbd %d -> %d (%s); before: %d statements; while looking: %d of %d seen; after: %d of %d seen, Com_select +%d",
				old, pid, tc.name, len(matching(qs, "SELECT 'before the restart'")), len(matching(qs, "SELECT 'while looking'")), looking, seen, after, selects)
		})
	}
}

// Traced without naming a server (a PostgreSQL runs, so that the trace
// starts), dbiolat picks up a MariaDB that starts after it attached, and
// follows it through a clean restart and a kill -9 and start: each of its
// three lives' 100 statements is seen, under that life's pid, with its
// data directory and port. (Before every engine went through one seam:
// 0 of 100 in each life.)
func TestMariaDBStartedIsTraced(t *testing.T) {
	pg := startPG(t, nil)
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--raw-sql")
	port := freePort(t)
	s := startMariaDBWith(t, mysandbox.Options{Port: port})
	ctx := mysqlContext(t)
	const n = 100
	lives := []string{"started", "restart", "kill -9"}
	pids := make([]int, len(lives))
	for life, how := range lives {
		switch how {
		case "started":
			waitSays(t, tr, "the trace to find the MariaDB started after it", fmt.Sprintf("MariaDB pid %d (%s) has started: tracing it", s.PID(), s.DataDir), nil)
		default:
			old := s.PID()
			if err := s.Restart(ctx, how == "kill -9"); err != nil {
				t.Fatal(err)
			}
			if waitSays(t, tr, "the trace to find the MariaDB back after a "+how, fmt.Sprintf("MariaDB on %s is back as pid %d: tracing it", s.DataDir, s.PID()), nil) {
				checkSaidInOrder(t, tr, fmt.Sprintf("MariaDB pid %d (%s) has exited: waiting for it to come back", old, s.DataDir),
					fmt.Sprintf("MariaDB on %s is back as pid %d", s.DataDir, s.PID()))
			}
		}
		pids[life] = s.PID()
		mySQL(t, s, markedSelects("life "+strconv.Itoa(life+1), n))
	}
	psql(t, pg, "SELECT 'on PostgreSQL'")
	// Default discovery traces every server of the machine, another
	// suite's benchmarks too, whose load may fill the ring buffer: what
	// this test promises is its own statements' records, each checked.
	tr.mayLose = true
	qs, _, sum := tr.stop(t)
	if lost := sum.Drops.Lost(); lost != 0 {
		t.Logf("records lost (other servers traced meanwhile: see stderr): %d\n%s", lost, tr.stderr.String())
	}
	for life, how := range lives {
		seen := checkMarked(t, qs, "life "+strconv.Itoa(life+1), n, pids[life], s.DataDir, port)
		t.Logf("life %d (%s, pid %d): %d of %d statements seen", life+1, how, pids[life], seen, n)
	}
	if len(matching(qs, "SELECT 'on PostgreSQL'")) != 1 {
		t.Errorf("the PostgreSQL traced from the start is no longer traced")
	}
}

// holdWhileStarting stops (SIGSTOP) the next mariadbd that starts on
// dataDir, other than pid old, as soon as it runs, before it has read its
// options, moved to its data directory and opened its port, for hold,
// then lets it go on (SIGCONT): a server slow to start, as one recovering
// a large redo log is, or one on a busy machine. The trace looks for
// servers every second: it finds this one while it is starting. The
// channel gives the pid held, once it goes on (0: none was seen in a
// minute).
func holdWhileStarting(dataDir string, old int, hold time.Duration) <-chan int {
	held := make(chan int, 1)
	go func() {
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				pid, err := strconv.Atoi(e.Name())
				if err != nil || pid == old {
					continue
				}
				if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); filepath.Base(exe) != "mariadbd" {
					continue
				}
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				args := strings.Split(string(cmdline), "\x00")
				if !slices.Contains(args, "--datadir="+dataDir) || slices.Contains(args, "--bootstrap") {
					continue
				}
				syscall.Kill(pid, syscall.SIGSTOP)
				time.Sleep(hold)
				syscall.Kill(pid, syscall.SIGCONT)
				held <- pid
				return
			}
		}
		held <- 0
	}()
	return held
}

// A MariaDB the trace finds while it is still starting (held 3 s just
// after it began, before it moved to its data directory and opened its
// port): it is named once started, by its data directory, and its records
// carry its port; the same when it comes back from a kill -9 slowly. A
// server's name and port are read once it runs as a server, not from
// where a starting process happens to stand.
func TestMariaDBFoundWhileStarting(t *testing.T) {
	pg := startPG(t, nil)
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--raw-sql")
	port := freePort(t)
	const hold, n = 3 * time.Second, 100
	parent := t.TempDir() // the sandbox's directory in it: its data directory's path is known before it starts
	var s *mysandbox.Server
	started := make(chan bool)
	var held <-chan int
	go func() {
		// The sandbox's directory is mysandbox-* in parent: wait for it to
		// know the data directory to watch for.
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			if m, _ := filepath.Glob(filepath.Join(parent, "mysandbox-*")); len(m) == 1 {
				held = holdWhileStarting(filepath.Join(m[0], "data"), 0, hold)
				break
			}
		}
		close(started)
	}()
	s = startMariaDBWith(t, mysandbox.Options{Dir: parent, Port: port})
	<-started
	if held == nil {
		t.Fatal("the sandbox's directory was not seen")
	}
	pids := []int{s.PID()}
	if pid := <-held; pid != s.PID() {
		t.Fatalf("held pid %d while starting; the server is %d", pid, s.PID())
	}
	waitSays(t, tr, "the trace to find the MariaDB started", fmt.Sprintf("MariaDB pid %d (%s) has started: tracing it", s.PID(), s.DataDir), nil)
	mySQL(t, s, markedSelects("started slowly", n))

	old := s.PID()
	held = holdWhileStarting(s.DataDir, old, hold)
	if err := s.Restart(mysqlContext(t), true); err != nil {
		t.Fatal(err)
	}
	if pid := <-held; pid != s.PID() {
		t.Fatalf("held pid %d while starting again; the server is %d", pid, s.PID())
	}
	pids = append(pids, s.PID())
	waitSays(t, tr, "the trace to find the MariaDB back", fmt.Sprintf("MariaDB on %s is back as pid %d: tracing it", s.DataDir, s.PID()), nil)
	mySQL(t, s, markedSelects("back slowly", n))
	psql(t, pg, "SELECT 'on PostgreSQL'")
	tr.mayLose = true // as in TestMariaDBStartedIsTraced: every server of the machine is traced
	qs, _, _ := tr.stop(t)
	for i, mark := range []string{"started slowly", "back slowly"} {
		seen := checkMarked(t, qs, mark, n, pids[i], s.DataDir, port)
		t.Logf("%s (pid %d): %d of %d statements seen", mark, pids[i], seen, n)
	}
	for _, line := range strings.Split(tr.stderr.String(), "\n") {
		if strings.Contains(line, "MariaDB") {
			t.Logf("the trace said: %s", line)
		}
	}
}

// serveRun is a running serve, its exit waited for as it comes.
type serveRun struct {
	*trace
	done chan struct{} // closed when serve has exited; err is then set
	err  error
}

// startServe runs serve and returns once it serves its metrics (it may
// attach to no server yet), with their URL.
func startServe(t *testing.T, args ...string) (*serveRun, string) {
	t.Helper()
	sv := &serveRun{trace: &trace{cmd: exec.Command(binary, append([]string{"serve"}, args...)...)}, done: make(chan struct{})}
	sv.cmd.Stdout = &sv.stdout
	sv.cmd.Stderr = &sv.stderr
	if err := sv.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { sv.err = sv.cmd.Wait(); close(sv.done) }()
	t.Cleanup(func() { sv.cmd.Process.Kill(); <-sv.done })
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if m := servingRe.FindStringSubmatch(sv.stderr.String()); m != nil {
			return sv, m[1]
		}
		select {
		case <-sv.done:
			t.Fatalf("serve exited (%v) before it served its metrics:\n%s", sv.err, sv.stderr.String())
		default:
		}
	}
	t.Fatalf("serve did not serve its metrics in 30 s:\n%s", sv.stderr.String())
	return nil, ""
}

// stop ends serve with Ctrl-C: it must exit cleanly.
func (sv *serveRun) stop(t *testing.T) {
	t.Helper()
	sv.cmd.Process.Signal(syscall.SIGINT)
	<-sv.done
	if sv.err != nil {
		t.Errorf("serve exited with %v:\n%s", sv.err, sv.stderr.String())
	}
}

// gauge is a metric family's only gauge; -1 if the family is missing.
func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	f := fams[name]
	if f == nil || len(f.GetMetric()) == 0 {
		return -1
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}

// counterSum is the sum of a counter family's series.
func counterSum(fams map[string]*dto.MetricFamily, name string) (n float64) {
	for _, m := range fams[name].GetMetric() {
		n += m.GetCounter().GetValue()
	}
	return n
}

// serveLoad is the statements serve counts in TestServeWaitsForAServer:
// one client, each kind of sysbenchKinds, with the server's counter each
// goes to.
func serveLoad(round int) (script string, want map[string]uint64) {
	var b strings.Builder
	want = map[string]uint64{}
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS w.t%d (id INT PRIMARY KEY, v INT) ENGINE=InnoDB;\n", round)
	want["com_create_table"]++
	for i := range 20 {
		fmt.Fprintf(&b, "BEGIN; INSERT INTO w.t%[1]d VALUES (%[2]d, 0); UPDATE w.t%[1]d SET v = v + 1 WHERE id = %[2]d; SELECT v FROM w.t%[1]d WHERE id = %[2]d; COMMIT;\n", round, i)
		want["com_begin"]++
		want["com_insert"]++
		want["com_update"]++
		want["com_select"]++
		want["com_commit"]++
	}
	fmt.Fprintf(&b, "DELETE FROM w.t%d WHERE id < 10;\n", round)
	want["com_delete"]++
	return b.String(), want
}

// checkServeCounts runs serveLoad on s and checks that serve's
// dbiolat_queries_total grew by as many statements as the server counted
// in its Com_* counters. The counters are read outside the counted window
// (a reading is a statement too, counted in Com_show_status by its own
// reading): read, a tick and a window pass, serve read; statements; a tick
// and a window; serve read, counters read.
func checkServeCounts(t *testing.T, tr *serveRun, url string, s *mysandbox.Server, round int, pids ...int) {
	t.Helper()
	script, want := serveLoad(round)
	c0 := comCounters(t, s)
	time.Sleep(2500 * time.Millisecond)
	q0 := counterSum(scrape(t, url), "dbiolat_queries_total")
	mySQL(t, s, script)
	time.Sleep(2500 * time.Millisecond)
	fams := scrape(t, url)
	q1 := counterSum(fams, "dbiolat_queries_total")
	c1 := comCounters(t, s)
	skipIfOthers(t, tr, fams, s.DataDir, pids...)
	var ran uint64
	for name, v := range c1 {
		d := v - c0[name]
		switch {
		case name == "com_show_status": // the second reading, after the window
			if d != 1 {
				t.Errorf("Com_show_status +%d, want 1: another client ran statements", d)
			}
		case strings.HasPrefix(name, "com_"):
			ran += d
			if d != want[name] {
				t.Errorf("%s +%d, the test ran %d", name, d, want[name])
			}
		}
	}
	t.Logf("round %d: dbiolat_queries_total +%.0f; the server counted %d statements (Com_*)", round, q1-q0, ran)
	if q1-q0 != float64(ran) {
		t.Errorf("round %d: serve counted %.0f queries, the server %d statements", round, q1-q0, ran)
	}
}

// hasServerInfo says whether dbiolat_server_info has a series with these labels.
func hasServerInfo(fams map[string]*dto.MetricFamily, labels map[string]string) bool {
	return slices.ContainsFunc(fams["dbiolat_server_info"].GetMetric(), func(m *dto.Metric) bool {
		for k, v := range labels {
			if labelOf(m, k) != v {
				return false
			}
		}
		return true
	})
}

// serve started while no database server runs waits for one: it says so,
// /healthz says so (200), dbiolat_servers_traced is 0. A MariaDB that
// starts is attached and named by dbiolat_server_info, and serve counts
// its statements as the server does; after a kill -9 and start, once serve
// says it is back, again. This needs a machine where no other PostgreSQL
// or MariaDB runs: a developer's with one skips it; under CI, where tests
// run one package at a time and each stops its servers, one is a leak
// and fails it (needNoOtherServer).
func TestServeWaitsForAServer(t *testing.T) {
	testenv.NeedRoot(t)
	// Servers of other tests (or of a suite run beside this one) come and
	// go: wait a while for none to run.
	var running []string
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		running = runningServers()
		if len(running) == 0 {
			break
		}
		if time.Now().After(end) {
			needNoOtherServer(t, "a database server runs on this machine (%s): serve would trace it, and this test needs none running", strings.Join(running, ", "))
		}
	}
	tr, url := startServe(t, "--duty", "off", "--listen", "127.0.0.1:0", "--window", "1s")
	base := strings.TrimSuffix(url, "/metrics")
	waitSays(t, tr.trace, "serve to say it waits", "No database server is running: waiting for one to start", nil)
	fams := scrape(t, url)
	skipIfOthers(t, tr, fams, "")
	if v := gauge(fams, "dbiolat_servers_traced"); v != 0 {
		t.Errorf("dbiolat_servers_traced is %v with no server running, want 0", v)
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "waiting for a database server") {
		t.Errorf("/healthz while waiting: %d %q, want 200 and that it waits for a database server", resp.StatusCode, body)
	}

	s := startMariaDB(t, nil)
	mySQL(t, s, "CREATE DATABASE w")
	info := func() map[string]string {
		return map[string]string{"server": s.DataDir, "kind": "MariaDB", "pid": strconv.Itoa(s.PID()), "data_dir": s.DataDir}
	}
	serverInfo := func(what string) {
		t.Helper()
		for end := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if fams = scrape(t, url); hasServerInfo(fams, info()) {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("waited a minute for %s: no dbiolat_server_info with %v among %v; serve said:\n%s",
					what, info(), fams["dbiolat_server_info"].GetMetric(), tr.stderr.String())
			}
		}
	}
	serverInfo("serve to attach to the MariaDB started")
	skipIfOthers(t, tr, fams, s.DataDir, s.PID())
	if v := gauge(fams, "dbiolat_servers_traced"); v != 1 {
		t.Errorf("dbiolat_servers_traced is %v once the MariaDB is traced, want 1", v)
	}
	checkSaidInOrder(t, tr.trace, "No database server is running: waiting for one to start",
		fmt.Sprintf("MariaDB pid %d (%s) has started: tracing it", s.PID(), s.DataDir))
	checkServeCounts(t, tr, url, s, 1, s.PID())

	old := s.PID()
	if err := s.Restart(mysqlContext(t), true); err != nil {
		t.Fatal(err)
	}
	waitSays(t, tr.trace, "serve to find the MariaDB back", fmt.Sprintf("MariaDB on %s is back as pid %d: tracing it", s.DataDir, s.PID()), nil)
	checkSaidInOrder(t, tr.trace, fmt.Sprintf("MariaDB pid %d (%s) has exited: waiting for it to come back", old, s.DataDir),
		fmt.Sprintf("MariaDB on %s is back as pid %d", s.DataDir, s.PID()))
	serverInfo("dbiolat_server_info to name the new pid")
	if v := gauge(fams, "dbiolat_servers_traced"); v != 1 {
		t.Errorf("dbiolat_servers_traced is %v after the restart, want 1", v)
	}
	checkServeCounts(t, tr, url, s, 2, old, s.PID())
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz while tracing: %v %v", resp, err)
	}
	tr.stop(t)
}

// runningServers lists the PostgreSQL and MySQL-family servers running
// on the machine.
func runningServers() []string {
	var running []string
	pgs, _ := postgres.Discover()
	for _, in := range pgs {
		running = append(running, fmt.Sprintf("PostgreSQL pid %d (%s)", in.PID, in.DataDir))
	}
	mys, _ := mysql.Discover()
	for _, in := range mys {
		running = append(running, fmt.Sprintf("%s pid %d (%s)", in.Flavor, in.PID, in.DataDir))
	}
	return running
}

// skipIfOthers skips the test if serve traced, at any time, a server
// other than the one at dataDir ("" none) whose pids are pids: started by
// another test or suite beside this one, its statements would be counted
// too. (A server of ours misnamed is not another's: the test then fails
// on its name.)
func skipIfOthers(t *testing.T, tr *serveRun, fams map[string]*dto.MetricFamily, dataDir string, pids ...int) {
	t.Helper()
	ours := func(pid string, dir string) bool {
		return dataDir != "" && dir == dataDir || slices.Contains(pids, atoi(pid))
	}
	var others []string
	for _, m := range fams["dbiolat_server_info"].GetMetric() {
		if !ours(labelOf(m, "pid"), labelOf(m, "data_dir")) {
			others = append(others, labelOf(m, "kind")+" pid "+labelOf(m, "pid")+" ("+labelOf(m, "data_dir")+")")
		}
	}
	for _, m := range startedRe.FindAllStringSubmatch(tr.stderr.String(), -1) {
		if !ours(m[1], m[2]) {
			others = append(others, m[0])
		}
	}
	if len(others) > 0 {
		needNoOtherServer(t, "another database server started on this machine meanwhile (%s): this test needs none but its own; serve said:\n%s",
			strings.Join(others, "; "), tr.stderr.String())
	}
}

// startedRe is a trace's line saying a server started: its pid, its name.
var startedRe = regexp.MustCompile(`\S+ pid (\d+) \((.*)\) has started`)

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// A MariaDB in a pod killed with SIGKILL and started again by the
// container's init, in the same pid and mount namespaces: slowlog --pid
// follows it to its new pid, by its name (pod and data directory as the
// server sees it); every statement after it says so is seen, and its
// records name the pod, its container and the data directory, as before.
func TestMariaDBInPodFollowedAcrossRestart(t *testing.T) {
	const name, uid, id = "my-1", "4d3c2b1a-0f9e-4d8c-9b7a-6f5e4d3c2b1a", "5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b"
	p := startMyPod(t, name, uid, id)
	want := container.Info{Runtime: "cri-o", ID: id, PodUID: uid, QoS: "besteffort", Namespace: "prod", Pod: name}
	if _, err := os.Stat(filepath.Join(myPodDataDir, "mariadbd.pid")); err == nil {
		t.Fatalf("the pod's data directory %s is seen from the host", myPodDataDir)
	}
	old := p.server
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--raw-sql", "--pid", strconv.Itoa(old))
	const before, after = 10, 100
	if _, err := p.sql(markedSelects("before the restart", before)); err != nil {
		t.Fatal(err)
	}
	p.killAndStart(t)
	back := fmt.Sprintf("MariaDB on %s is back as pid %d: tracing it", p.label(), p.server)
	looking := 0
	waitSays(t, tr, "the trace to find the pod's restarted server", back, func() {
		p.sql(fmt.Sprintf("SELECT 'while looking', %d", looking))
		looking++
	})
	checkSaidInOrder(t, tr, fmt.Sprintf("MariaDB pid %d (%s) has exited: waiting for it to come back", old, p.label()), back)
	if _, err := p.sql(markedSelects("after the restart", after)); err != nil {
		t.Fatal(err)
	}
	qs, _, _ := tr.stop(t)
	checkMarked(t, qs, "before the restart", before, old, myPodDataDir, 0)
	seen := checkMarked(t, qs, "after the restart", after, p.server, myPodDataDir, 0)
	wrong := 0
	for _, q := range append(matching(qs, "SELECT 'before the restart'"), matching(qs, "SELECT 'after the restart'")...) {
		if q.Container == nil || *q.Container != want {
			if wrong++; wrong <= 3 {
				t.Errorf("%q names container %+v, want %+v", q.Query, q.Container, want)
			}
		}
	}
	t.Logf("pod %s: mariadbd %d -> %d (init %d); while looking: %d of %d seen; after: %d of %d seen",
		name, old, p.server, p.init, len(matching(qs, "SELECT 'while looking'")), looking, seen, after)
}

// myBigTable is TestMySQLColdScan's table: 400,000 rows of 255 bytes
// (about 130 MB of pages), four times the buffer pool, written back.
const myBigTable = `CREATE DATABASE scan; CREATE TABLE scan.big (id INT PRIMARY KEY AUTO_INCREMENT, pad CHAR(255)) ENGINE=InnoDB;
	INSERT INTO scan.big (pad) SELECT REPEAT('x', 255) FROM scan.seq_1_to_400000;
	SET GLOBAL innodb_max_dirty_pages_pct = 0; FLUSH TABLES scan.big FOR EXPORT; UNLOCK TABLES`

// myScan is the cold scan recorded.
const myScan = "SELECT SUM(LENGTH(pad)) FROM big"

// recordMyColdScans records (with --fs) two cold-cache scans of big on s,
// and returns their records; check, if given, runs on the recording.
func recordMyColdScans(t *testing.T, s *mysandbox.Server, file string, check func(tr *trace)) []model.Query {
	t.Helper()
	tr := startTrace(t, "record", "--fs", "-o", file, "--pid", strconv.Itoa(s.PID()))
	if check != nil {
		check(tr)
	}
	for range 2 {
		dropCaches(t)
		if _, err := s.SQL(mysqlContext(t), "scan", myScan); err != nil {
			t.Fatal(err)
		}
	}
	r := tr.stopRecording(t)
	return only(t, slices.Collect(r.Queries), myScan, 2)
}

// MariaDB with its data directory on a FUSE file system (bindfs, every
// read a request to its daemon: direct_io), beside the same on the plain
// disk: doctor names the engine under the MariaDB; the cold scans'
// requests go to the daemon and its work for them (its time, its CPU, its
// reads and block requests) is the scans'; compare of the plain and the
// FUSE recordings follows the scans' time down to the daemon and names
// it. As TestFUSEEngineWorkIsTheQuerys and TestCompareNamesTheFUSEEngine
// check for PostgreSQL.
func TestMariaDBOnFUSEStorage(t *testing.T) {
	mnt := bindfsMount(t, "direct_io")
	dir := t.TempDir()
	plain, fuse := filepath.Join(dir, "plain.dbiolat"), filepath.Join(dir, "fuse.dbiolat")

	a := startMariaDB(t, nil)
	mySQL(t, a, myBigTable)
	recordMyColdScans(t, a, plain, nil)
	a.Stop()

	b := startMariaDBWith(t, mysandbox.Options{Dir: mnt})
	if !strings.HasPrefix(b.DataDir, mnt+"/") {
		t.Fatalf("the MariaDB's data directory %s is not under the mount %s", b.DataDir, mnt)
	}
	mySQL(t, b, myBigTable)
	if st := doctorStorage(t, b.PID()); !strings.Contains(st, "bindfs[") {
		t.Errorf("doctor does not name the FUSE engine under the MariaDB: %q", st)
	}
	engines, err := storage.Under(mnt)
	if err != nil || len(engines) != 1 {
		t.Fatalf("the daemon under %s: %v, %v", mnt, engines, err)
	}
	var engineCPU, notTasks float64
	scans := recordMyColdScans(t, b, fuse, func(tr *trace) {
		if !strings.Contains(tr.stderr.String(), "storage engine bindfs[") {
			t.Errorf("the trace does not say it found the storage engine: %s", tr.stderr.String())
		}
		engineCPU, notTasks = -processCPU(t, engines[0].PID), -notTasksCPU(t)
	})
	engineCPU += processCPU(t, engines[0].PID)
	notTasks += notTasksCPU(t)
	var cpu float64
	for i, q := range scans {
		reads := uint64(0)
		if q.EngineFS != nil {
			reads = q.EngineFS.FSReadCount
		}
		t.Logf("cold scan %d on FUSE: %.1f ms, io wait %.1f ms; %d reads (%d missed) in %.1f ms; %d FUSE requests in %.1f ms (%d KiB); engine %d served %.1f ms (%.1f ms on CPU) with %d reads, %d of %d block requests",
			i+1, ms(q.QueryNs), ms(q.IOWaitNs), q.FSReadCount, q.FSReadMissCount, ms(q.FSReadNs), q.FuseCount, ms(q.FuseNs), q.FuseBytes>>10,
			q.EnginePID, ms(q.EngineNs), ms(q.EngineCPUNs), reads, q.EngineBlkCount, q.BlkCount)
		// The scan's own reads (InnoDB's page reads in the connection's
		// thread: the read-ahead is its I/O threads') miss the cold page
		// cache: with direct_io each is a request to the daemon, which
		// reads the file beneath, from the disk.
		if q.FSReadCount == 0 || q.FuseCount == 0 || q.FuseBytes == 0 {
			t.Errorf("scan %d: %d file system reads, %d FUSE requests for %d bytes", i+1, q.FSReadCount, q.FuseCount, q.FuseBytes)
		}
		if q.EnginePID != engines[0].PID || q.EngineNs == 0 || reads == 0 || q.EngineBlkCount == 0 || q.EngineBlkCount > q.BlkCount {
			t.Errorf("scan %d: the engine's work is not the query's: engine %d (bindfs is %d), %d ns, %d reads, %d of %d block requests",
				i+1, q.EnginePID, engines[0].PID, q.EngineNs, reads, q.EngineBlkCount, q.BlkCount)
		}
		// The daemon answers each request inside the time the query
		// waited for it, and is on CPU for part of its serving time.
		if q.EngineNs > q.FuseNs || q.FuseNs > q.QueryNs*uint64(max(1, q.FuseCount)) {
			t.Errorf("scan %d: engine time %d ns, request time %d ns, query %d ns", i+1, q.EngineNs, q.FuseNs, q.QueryNs)
		}
		if q.EngineCPUNs == 0 || q.EngineCPUNs > q.EngineNs {
			t.Errorf("scan %d: engine CPU %d ns of its %d ns serving", i+1, q.EngineCPUNs, q.EngineNs)
		}
		cpu += float64(q.EngineCPUNs)
	}
	// The daemon's CPU for the scans is at most its CPU over the
	// recording as the kernel counts it (ticks: 20 ms for the ends), and
	// what the machine's interrupts and steal add to its on-CPU spans
	// (TestFUSEEngineWorkIsTheQuerys). No lower bound: the daemon also
	// served InnoDB's read-ahead and background threads meanwhile.
	if cpu > engineCPU+notTasks+20e6 {
		t.Errorf("engine CPU for the scans %.1f ms; the daemon's CPU over the recording was %.1f ms, the machine's steal and interrupt time %.1f ms",
			cpu/1e6, engineCPU/1e6, notTasks/1e6)
	}
	t.Logf("engine CPU for the scans %.1f ms, the daemon's over the recording %.1f ms", cpu/1e6, engineCPU/1e6)

	out, err := exec.Command(binary, "compare", plain, fuse).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "arises in the userspace storage engine bindfs[") {
		t.Errorf("compare does not name the FUSE engine under the MariaDB")
	}
}

// needNoOtherServer stops a test that needs no database server but its
// own: skipped on a developer's machine, failed under CI.
func needNoOtherServer(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}
