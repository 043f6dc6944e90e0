package main

// Statements as applications send them: real drivers from the package
// registries (psycopg 3 from PyPI, pgJDBC from Maven Central), driven by
// the small programs in testdata/drivers. Pipelines and batches send many
// statements before one Sync; a fetch size suspends a portal and resumes
// it; a simple Query may hold several statements. Each case's statements
// are counted as pg_stat_statements counts them.

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
)

// driverCase is one way a driver talks: the program that runs it, and the
// tables (or cursor) its statements name, which tell its statements apart.
type driverCase struct {
	driver, name string
	marker       *regexp.Regexp
}

func TestDriversStatementsCounted(t *testing.T) {
	sideBySide(t)
	python, jars := driverTools(t)
	port := 20000 + (os.Getpid()+17)%20000
	c := startPG(t, map[string]string{"listen_addresses": "127.0.0.1", "port": strconv.Itoa(port)})
	cases := []driverCase{
		{"psycopg", "pipeline", regexp.MustCompile(`drv_pipeline\b`)},
		{"psycopg", "executemany", regexp.MustCompile(`drv_executemany\b`)},
		{"psycopg", "cursor", regexp.MustCompile(`drv_(cursor|named)\b`)},
		{"psycopg", "copy", regexp.MustCompile(`drv_copy\b`)},
		{"psycopg", "multi", regexp.MustCompile(`drv_multi\b`)},
		{"psycopg", "error", regexp.MustCompile(`drv_error\b`)},
		{"pgjdbc", "batch", regexp.MustCompile(`drv_batch\b`)},
		{"pgjdbc", "prepared", regexp.MustCompile(`drv_prepared\b`)},
		{"pgjdbc", "fetch", regexp.MustCompile(`drv_fetch\b`)},
		{"libpq", "pipeline", regexp.MustCompile(`drv_libpq\b`)},
	}
	// libpq's pipeline mode, as pgbench drives it: 10 INSERTs a Sync, 30 times.
	script := filepath.Join(reachableTempDir(t, "libpq-pipeline-"), "pipeline.sql")
	body := "\\startpipeline\n" + strings.Repeat("INSERT INTO drv_libpq VALUES (:client_id, 'x');\n", 10) + "\\endpipeline\n"
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}

	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
	for _, dc := range cases {
		if dc.driver == "libpq" {
			psql(t, c, "CREATE TABLE drv_libpq (id int, v text)")
		}
		runDriver(t, c, dc, python, jars, port, func(ctx context.Context) *exec.Cmd {
			return c.PgbenchCmd(ctx, "postgres", "-n", "-M", "extended", "-f", script, "-t", "30")
		})
	}
	queries, _, sum := tr.stop(t)
	checkDriverCounts(t, c, cases, queries, sum, false)
	t.Logf("statements timed in groups: %d", sum.Drops.Of("wire_grouped"))
}

// A portal suspended at its row limit and then dropped unfinished (a
// one-row fetch, a result set closed early): PostgreSQL ends its statement
// (ExecutorEnd) when it drops the portal, at the Sync that ends an
// autocommit transaction, at a Close, a new unnamed portal or the commit,
// and pg_stat_statements counts it there; so does dbiolat. A rollback
// drops the portals still open uncounted, by both (open_rollback: pgJDBC
// closes a statement's result set when it runs it again, so 9 of its 10
// SELECTs are closed and count, the last one is rolled back and does
// not). On every major version.
func TestDriversSuspendedPortalsCounted(t *testing.T) {
	sideBySide(t)
	python, jars := driverTools(t)
	for _, v := range pgsandbox.Versions {
		t.Run("pg"+v, func(t *testing.T) {
			t.Parallel()
			port := freePort(t)
			c := startVersion(t, v, map[string]string{"listen_addresses": "127.0.0.1", "port": strconv.Itoa(port)})
			cases := []driverCase{
				{"pgjdbc", "onerow", regexp.MustCompile(`drv_onerow\b`)},
				{"pgjdbc", "onerow_tx", regexp.MustCompile(`drv_onerow_tx\b`)},
				{"pgjdbc", "onerow_rollback", regexp.MustCompile(`drv_onerow_rollback\b`)},
				{"pgjdbc", "closed", regexp.MustCompile(`drv_closed\b`)},
				{"pgjdbc", "open_rollback", regexp.MustCompile(`drv_open_rollback\b`)},
				{"asyncpg", "fetchrow", regexp.MustCompile(`drv_afetchrow\b`)},
				{"asyncpg", "cursor", regexp.MustCompile(`drv_acursor\b`)},
			}
			tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
			for _, dc := range cases {
				runDriver(t, c, dc, python, jars, port, nil)
			}
			queries, _, sum := tr.stop(t)
			checkDriverCounts(t, c, cases, queries, sum, true)
			// Those a later round trip ended make records of their own,
			// which say so; in autocommit the round trip's own record
			// counts its portal.
			ended := map[string]int{}
			for _, q := range queries {
				if q.PortalsEnded > 0 && (q.Statements != q.PortalsEnded || q.EarlierNs == 0) {
					t.Errorf("a record of %d statements, %d of them portals ended, their parts' time %d: %q",
						q.Statements, q.PortalsEnded, q.EarlierNs, q.Query)
				}
				for _, dc := range cases {
					if dc.marker.MatchString(q.Query) {
						ended[dc.name] += q.PortalsEnded
					}
				}
			}
			want := map[string]int{"onerow": 0, "fetchrow": 0, "onerow_tx": 50, "onerow_rollback": 20, "closed": 30, "open_rollback": 9, "cursor": 20}
			for name, n := range want {
				if ended[name] != n {
					t.Errorf("%s: %d statements in records of portals ended, want %d", name, ended[name], n)
				}
			}
		})
	}
}

// runDriver runs one driver case against c (pgJDBC over TCP on port, the
// Python drivers over its unix socket); libpq's command comes from other.
func runDriver(t *testing.T, c *pgsandbox.Cluster, dc driverCase, python string, jars driverJars, port int,
	other func(context.Context) *exec.Cmd) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	switch dc.driver {
	case "psycopg", "asyncpg":
		cmd = exec.CommandContext(ctx, python, filepath.Join("testdata", "drivers", "pg_"+dc.driver+".py"), dc.name)
		cmd.Env = append(os.Environ(), c.Env()...)
	case "pgjdbc":
		url := fmt.Sprintf("jdbc:postgresql://127.0.0.1:%d/postgres?user=postgres", port)
		cmd = exec.CommandContext(ctx, "java", "-cp", jars.pgjdbc, filepath.Join("testdata", "drivers", "PgJdbc.java"), url, dc.name)
	default:
		cmd = other(ctx)
	}
	if _, err := cmdrun.Run(cmd, nil, dc.driver); err != nil {
		t.Fatalf("%s %s: %v", dc.driver, dc.name, err)
	}
}

// checkDriverCounts: each case's statements, as dbiolat counted them, are
// what pg_stat_statements counted (byKind: each kind of statement of a
// case on its own, by its first word: a case's SELECT apart from its
// CREATE and INSERT); every record is named; a connection's records never
// overlap; no round trip went unseen, unwalked or unread.
func checkDriverCounts(t *testing.T, c *pgsandbox.Cluster, cases []driverCase, queries []model.Query, sum model.Summary, byKind bool) {
	t.Helper()
	key := func(dc driverCase, query string) string {
		k := dc.driver + " " + dc.name
		if byKind {
			first, _, _ := strings.Cut(strings.TrimSpace(query), " ")
			k += " " + strings.ToUpper(first)
		}
		return k
	}
	// pg_stat_statements counts the statements that succeeded.
	theirs, ours, failed, records := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	var keys []string
	for _, line := range strings.Split(psql(t, c, "SELECT calls, query FROM pg_stat_statements WHERE query LIKE '%drv\\_%'"), "\n") {
		calls, query, _ := strings.Cut(line, "|")
		n, _ := strconv.Atoi(calls)
		for _, dc := range cases {
			if dc.marker.MatchString(query) {
				theirs[key(dc, query)] += n
				keys = append(keys, key(dc, query))
			}
		}
	}
	for _, dc := range cases {
		if !byKind {
			keys = append(keys, key(dc, ""))
		}
		for _, q := range queries {
			if dc.marker.MatchString(q.Query) {
				k := key(dc, q.Query)
				ours[k] += q.Statements - q.Failed
				failed[dc.name] += q.Failed
				records[k]++
				keys = append(keys, k)
			}
		}
		if want := map[string]int{"error": 1}[dc.name]; failed[dc.name] != want {
			t.Errorf("%s %s: %d statements failed, want %d", dc.driver, dc.name, failed[dc.name], want)
		}
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		t.Logf("%-32s pg_stat_statements %4d, dbiolat %4d in %d records", k, theirs[k], ours[k], records[k])
		if ours[k] != theirs[k] || (theirs[k] == 0 && !byKind) { // by kind: none may be right (a rollback's)
			t.Errorf("%s: dbiolat counted %d statements that succeeded, pg_stat_statements %d", k, ours[k], theirs[k])
		}
	}
	for _, q := range queries {
		if strings.TrimSpace(q.Query) == "" || strings.HasPrefix(q.Query, "-- ") {
			t.Errorf("a record without its statement's text: %q (%d statements)", q.Query, q.Statements)
		}
	}
	checkConnectionTimeline(t, queries)
	for _, loss := range []string{"wire_unseen", "wire_unwalked", "wire_unreadable", "wire_encrypted"} {
		if n := sum.Drops.Of(loss); n != 0 {
			t.Errorf("%s: %d", loss, n)
		}
	}
}

// checkConnectionTimeline: a connection's records never overlap, so their
// times add up to at most its busy time: no statement's time is counted
// twice, whatever the pipelining. (A PostgreSQL connection is its backend;
// a MySQL one, a connection id of the server.)
func checkConnectionTimeline(t *testing.T, qs []model.Query) {
	t.Helper()
	type conn struct {
		pid int
		id  uint32
	}
	byConn := map[conn][]model.Query{}
	for _, q := range qs {
		byConn[conn{q.PID, q.ConnectionID}] = append(byConn[conn{q.PID, q.ConnectionID}], q)
	}
	for c, list := range byConn {
		slices.SortFunc(list, func(a, b model.Query) int { return a.TS.Compare(b.TS) })
		for i := 1; i < len(list); i++ {
			if end := list[i-1].TS.Add(time.Duration(list[i-1].QueryNs)); end.After(list[i].TS) {
				t.Errorf("connection %v: %q ends %v after %q begins", c, list[i-1].Query, end.Sub(list[i].TS), list[i].Query)
			}
		}
	}
}

// driverJars are the Java drivers' jars.
type driverJars struct{ pgjdbc, mariadb, mysql string }

// driverTools finds the drivers scripts/install-deps installed: a Python
// with psycopg and PyMySQL, and the Java drivers' jars.
func driverTools(t *testing.T) (python string, jars driverJars) {
	t.Helper()
	tools, err := filepath.Abs(filepath.Join("..", "..", ".tools"))
	if err != nil {
		t.Fatal(err)
	}
	python = filepath.Join(tools, "venv", "bin", "python3")
	find := func(prefix string) string {
		m, _ := filepath.Glob(filepath.Join(tools, "java", prefix+"-*.jar"))
		if len(m) == 0 {
			return ""
		}
		return m[0]
	}
	jars = driverJars{pgjdbc: find("postgresql"), mariadb: find("mariadb-java-client"), mysql: find("mysql-connector-j")}
	_, err = os.Stat(python)
	if err != nil || jars.pgjdbc == "" || jars.mariadb == "" || jars.mysql == "" {
		msg := cmp.Or(fmt.Sprint(err), "a driver's jar is missing") + ": run scripts/install-deps"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return python, jars
}
