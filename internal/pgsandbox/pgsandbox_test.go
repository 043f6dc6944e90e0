package pgsandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

// startForTest starts a cluster, skipping the test when PostgreSQL is not
// installed (failing instead when CI=true), and stops it at cleanup.
func startForTest(t *testing.T, opts Options) *Cluster {
	t.Helper()
	testenv.NotShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if opts.Log == nil && testing.Verbose() {
		opts.Log = testLogWriter{t}
	}
	c, err := Start(ctx, opts)
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Every version starts, runs psql and pgbench (Debian's clients), counts
// in pg_stat_statements, and stops without a trace.
func TestCluster(t *testing.T) {
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) { testCluster(t, v) })
	}
}

func testCluster(t *testing.T, version string) {
	c := startForTest(t, Options{Version: version})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if c.Version() != version {
		t.Errorf("Version() = %q, want %q", c.Version(), version)
	}
	if out, err := c.Psql(ctx, "", "SHOW server_version_num"); err != nil || !strings.HasPrefix(out, version) {
		t.Errorf("server_version_num %q (%v), want PostgreSQL %s", out, err, version)
	}

	out, err := c.Psql(ctx, "", "SELECT 1")
	if err != nil || out != "1" {
		t.Fatalf("Psql(SELECT 1) = %q, %v", out, err)
	}
	if _, err := c.Psql(ctx, "", "SELECT * FROM no_such_table"); err == nil || !strings.Contains(err.Error(), "no_such_table") {
		t.Errorf("Psql error should include psql's stderr, got %v", err)
	}

	pid := c.PostmasterPID()
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("PostmasterPID() = %d is not a live process", pid)
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(filepath.Join(c.BinDir(), "postgres"))
	if exe != want {
		t.Errorf("/proc/%d/exe = %s, want %s", pid, exe, want)
	}
	if got, _ := c.Psql(ctx, "", "SELECT pg_backend_pid() <> 0, current_setting('listen_addresses')"); got != "t|" {
		t.Errorf("backend/listen_addresses check = %q", got)
	}

	if err := c.CreateDatabase(ctx, "bench"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pgbench(ctx, "bench", "-i", "-s", "1", "-q"); err != nil {
		t.Fatal(err)
	}
	out, err = c.Pgbench(ctx, "bench", "-t", "100", "-c", "2")
	if err != nil {
		t.Fatal(err)
	}
	res, err := ParsePgbench(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Transactions != 200 || res.Failed != 0 || res.TPS <= 0 || res.LatencyAvgMs <= 0 {
		t.Errorf("pgbench result %+v from:\n%s", res, out)
	}

	out, err = c.Psql(ctx, "", "SELECT sum(calls) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = 'bench' AND query LIKE 'UPDATE pgbench_accounts%'")
	if err != nil {
		t.Fatal(err)
	}
	if out != "200" {
		t.Errorf("pg_stat_statements calls for pgbench_accounts updates = %q, want 200", out)
	}

	// Clients started by others via Env() (as root: as the postgres user,
	// which PsqlCmd arranges) reach the same server.
	cmd := c.PsqlCmd(ctx, "bench", "-At", "-c", "SELECT count(*) FROM pgbench_branches")
	if b, err := cmd.Output(); err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Errorf("PsqlCmd: %q, %v", b, err)
	}

	dir := c.SocketDir()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still exists after Stop (%v)", dir, err)
	}
	if !processGone(pid) {
		t.Errorf("postmaster %d still running after Stop", pid)
	}
}

func TestStartFailureCleansUp(t *testing.T) {
	testenv.NotShort(t)
	if _, err := findBinDir(""); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	// Not t.TempDir(): it is 0700, which the postgres user cannot enter.
	parent, err := os.MkdirTemp("", "pgsandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Start(context.Background(), Options{Dir: parent, Settings: map[string]string{"shared_buffers": "bogus"}})
	if err == nil {
		t.Fatal("Start with a bad setting succeeded")
	}
	if !strings.Contains(err.Error(), `invalid value for parameter "shared_buffers"`) {
		t.Errorf("Start error should include the server log tail, got: %v", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("failed Start left %d entries in %s", len(entries), parent)
	}

	if os.Geteuid() == 0 {
		_, err := Start(context.Background(), Options{Dir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "cannot enter") {
			t.Errorf("Start in a directory the postgres user cannot reach: got %v", err)
		}
	}
}

// processGone reports whether pid has exited; a zombie counts as exited, as
// the daemonized postmaster is reaped by init, which may be slow to do so in a
// container.
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(after, "Z")
}
