package mysandbox

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/sandbox"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// startForTest starts a server, skipping the test when MariaDB is not
// installed (failing instead when CI=true), and stops it at cleanup.
func startForTest(t *testing.T, opts Options) *Server {
	t.Helper()
	testenv.NotShort(t)
	if opts.Log == nil && testing.Verbose() {
		opts.Log = testLogWriter{t}
	}
	s, err := Start(opts)
	skipIfNotInstalled(t, err)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// skipIfNotInstalled skips when err says a program is missing, unless CI
// must run the test: then the caller's t.Fatal fails it.
func skipIfNotInstalled(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A server starts with the defaults, answers, lives in its directory, and
// Stop leaves nothing behind.
func TestServer(t *testing.T) {
	t.Parallel()
	s := startForTest(t, Options{})
	ctx := testContext(t)

	if out, err := s.SQL(ctx, "", "SELECT 1"); err != nil || out != "1" {
		t.Fatalf(`SQL("SELECT 1") = %q, %v`, out, err)
	}
	if _, err := s.SQL(ctx, "", "SELECT * FROM mysql.no_such_table"); err == nil || !strings.Contains(err.Error(), "no_such_table") {
		t.Errorf("SQL's error should include the client's message, got %v", err)
	}
	want := "33554432\tfsync\t1\t0\t100\t1\t" + s.DataDir + "/"
	out, err := s.SQL(ctx, "", "SELECT @@innodb_buffer_pool_size, @@innodb_flush_method, @@performance_schema, @@log_bin, @@max_connections, @@skip_networking, @@datadir")
	if err != nil || out != want {
		t.Errorf("settings %q (%v), want %q", out, err, want)
	}

	pid := s.PID()
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil || filepath.Base(exe) != "mariadbd" {
		t.Errorf("PID() = %d runs %q (%v), want mariadbd", pid, exe, err)
	}
	if b, err := os.ReadFile(filepath.Join(s.Dir, "mariadbd.pid")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		t.Errorf("mariadbd.pid holds %q (%v), want %d", b, err, pid)
	}

	if s.DataDir != filepath.Join(s.Dir, "data") || filepath.Dir(s.Socket) != s.Dir {
		t.Errorf("DataDir %s and Socket %s should be in Dir %s", s.DataDir, s.Socket, s.Dir)
	}
	if fi, err := os.Stat(s.Socket); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("Socket %s is not a socket (%v)", s.Socket, err)
	}
	for _, name := range []string{"mysql", "performance_schema", "ibdata1", "ib_logfile0", "../error.log"} {
		if _, err := os.Stat(filepath.Join(s.DataDir, name)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, "test")); err == nil {
		t.Error("the data directory has a test database; mariadb-install-db should skip it")
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("Stop left %s: %v", s.Dir, err)
	}
	if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil {
		t.Errorf("Stop left pid %d running %s", pid, exe)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// Settings override the defaults, a skip_X default gives way to X, and a
// port makes the server listen on loopback only.
func TestSettingsAndPort(t *testing.T) {
	t.Parallel()
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := startForTest(t, Options{Port: port, Settings: map[string]string{
		"thread_handling":         "pool-of-threads",
		"innodb-buffer-pool-size": "64M",
		"log_bin":                 "binlog",
	}})
	ctx := testContext(t)
	want := "pool-of-threads\t67108864\t1\t0\t127.0.0.1\t" + strconv.Itoa(port)
	out, err := s.SQL(ctx, "", "SELECT @@thread_handling, @@innodb_buffer_pool_size, @@log_bin, @@skip_networking, @@bind_address, @@port")
	if err != nil || out != want {
		t.Errorf("settings %q (%v), want %q", out, err, want)
	}
	if s.Port != port {
		t.Errorf("Port = %d, want %d", s.Port, port)
	}
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// A server that cannot start says why, from its log, and leaves nothing
// behind; the sandbox's own options are refused.
func TestStartError(t *testing.T) {
	testenv.NotShort(t)
	t.Parallel()
	dir := t.TempDir()
	_, err := Start(Options{Dir: dir, Settings: map[string]string{"innodb_buffer_pool_size": "2M"}})
	skipIfNotInstalled(t, err)
	if err == nil || !strings.Contains(err.Error(), "requires innodb_buffer_pool_size >= 6 MiB") {
		t.Errorf("Start with a 2M buffer pool: %v, want InnoDB's complaint", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("a failed Start left %v in %s", left, dir)
	}
	if _, err := Start(Options{Dir: dir, Settings: map[string]string{"socket": "/tmp/x.sock"}}); err == nil || !strings.Contains(err.Error(), "socket") {
		t.Errorf("Start with a socket setting: %v, want a refusal", err)
	}
}

// sysbench's counts agree exactly with the server's own Com_* counters,
// in both prepared-statement modes:
//
//   - reads are Com_select, prepared or not: MariaDB counts a prepared
//     statement's execution under its command too;
//   - writes are Com_insert + Com_update + Com_delete, less the ignored
//     errors (a deadlocked statement counts on the server, not in
//     sysbench), as long as every write changes a row: sysbench counts one
//     that does not as other, so each run has its own seed;
//   - other is Com_begin + Com_commit: a failed event is retried from a new
//     BEGIN, which sysbench counts, so Com_begin is transactions + errors;
//     InnoDB rolls the failed transaction back itself (no Com_rollback);
//   - with --db-ps-mode=auto every statement, BEGIN and COMMIT included,
//     is also a Com_stmt_execute, and each thread prepares (and closes at
//     the end) oltp_read_write's 2 + 9 per table statements; with disable,
//     there are none.
//
// Two threads on 2 x 1000 rows rarely deadlock, but the equations hold
// when they do.
func TestSysbench(t *testing.T) {
	t.Parallel()
	s := startForTest(t, Options{})
	ctx := testContext(t)
	const tables, threads = 2, 2
	o := SysbenchOptions{Tables: tables, TableSize: 1000, Threads: threads}
	_, err := s.Sysbench(ctx, o, "prepare")
	skipIfNotInstalled(t, err)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.SQL(ctx, "sbtest", "SELECT COUNT(*) FROM sbtest2"); err != nil || out != "1000" {
		t.Fatalf("sbtest2 holds %q rows (%v), want 1000", out, err)
	}

	for i, mode := range []string{"auto", "disable"} {
		t.Run(mode, func(t *testing.T) {
			before := comStatus(ctx, t, s)
			o := o
			o.Events, o.PSMode, o.Seed = 20, mode, 1+i
			r, err := s.Sysbench(ctx, o, "run")
			if err != nil {
				t.Fatal(err)
			}
			after := comStatus(ctx, t, s)
			d := func(name string) uint64 { return after[name] - before[name] }
			t.Logf("%+v", r)

			if r.Events != 20 || r.Transactions != 20 || r.Reconnects != 0 {
				t.Errorf("events %d, transactions %d, reconnects %d; want 20, 20, 0", r.Events, r.Transactions, r.Reconnects)
			}
			if r.Total != r.Read+r.Write+r.Other || r.Queries != r.Total || r.Read == 0 || r.Write == 0 {
				t.Errorf("read %d + write %d + other %d, total %d, queries %d do not add up", r.Read, r.Write, r.Other, r.Total, r.Queries)
			}
			prepared, executed := uint64(0), uint64(0)
			if mode == "auto" {
				prepared, executed = threads*(2+9*tables), r.Total+r.Errors
			}
			for _, c := range []struct {
				what       string
				have, want uint64
			}{
				{"Com_select", d("Com_select"), r.Read},
				{"Com_insert + Com_update + Com_delete", d("Com_insert") + d("Com_update") + d("Com_delete"), r.Write + r.Errors},
				{"Com_begin + Com_commit", d("Com_begin") + d("Com_commit"), r.Other},
				{"Com_begin", d("Com_begin"), r.Transactions + r.Errors},
				{"Com_commit", d("Com_commit"), r.Transactions},
				{"Com_stmt_execute", d("Com_stmt_execute"), executed},
				{"Com_stmt_prepare", d("Com_stmt_prepare"), prepared},
				{"Com_stmt_close", d("Com_stmt_close"), prepared},
			} {
				if c.have != c.want {
					t.Errorf("%s went up by %d, want %d", c.what, c.have, c.want)
				}
			}
			for name := range after {
				switch name {
				case "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_begin", "Com_commit",
					"Com_stmt_execute", "Com_stmt_prepare", "Com_stmt_close", "Com_show_status":
				default:
					if d(name) != 0 {
						t.Errorf("%s went up by %d, want 0", name, d(name))
					}
				}
			}
		})
	}

	if _, err := s.Sysbench(ctx, o, "cleanup"); err != nil {
		t.Fatal(err)
	}
	if out, err := s.SQL(ctx, "sbtest", "SHOW TABLES"); err != nil || out != "" {
		t.Errorf("after cleanup sbtest holds %q (%v), want no tables", out, err)
	}
}

func comStatus(ctx context.Context, t *testing.T, s *Server) map[string]uint64 {
	t.Helper()
	out, err := s.SQL(ctx, "", `SHOW GLOBAL STATUS LIKE 'Com\_%'`)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, line := range strings.Split(out, "\n") {
		name, v, _ := strings.Cut(line, "\t")
		if m[name], err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("status line %q: %v", line, err)
		}
	}
	return m
}

func TestParseSysbench(t *testing.T) {
	const out = `sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Running the test with following options:
Number of threads: 16

SQL statistics:
    queries performed:
        read:                            11578
        write:                           2427
        other:                           1327
        total:                           15332
    transactions:                        500    (294.49 per sec.)
    queries:                             15332  (9030.15 per sec.)
    ignored errors:                      327    (192.59 per sec.)
    reconnects:                          1      (0.00 per sec.)

General statistics:
    total time:                          1.6970s
    total number of events:              500

Latency (ms):
         min:                                    2.83
         sum:                                  243.73

Threads fairness:
    events (avg/stddev):           31.2500/4.00
`
	r, err := ParseSysbench(out)
	want := SysbenchResult{Read: 11578, Write: 2427, Other: 1327, Total: 15332, Transactions: 500, Queries: 15332,
		Events: 500, Errors: 327, Reconnects: 1, Time: 1697 * time.Millisecond}
	if err != nil || r != want {
		t.Errorf("ParseSysbench = %+v, %v; want %+v", r, err, want)
	}
	if _, err := ParseSysbench("FATAL: no such test\n"); err == nil {
		t.Error("ParseSysbench of no report: no error")
	}
}
