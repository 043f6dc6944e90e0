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
	"github.com/jackc/pgx/v5"
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

// pgxStatement is one statement of the pgx batch: how it is queued, and
// the marker its text (ours and pg_stat_statements') holds.
type pgxStatement struct {
	marker string
	sql    string // or the name of a statement prepared on the connection
	args   func(i int) []any
}

// A Go service's batch (pgx's SendBatch) of 500 mixed statements, sent
// twice: in pgx's default mode (its statements prepared by a round trip
// of their own, then Bind/Execute by name) and in its exec mode (a Parse
// of the text before each statement, as psycopg's pipelines do). Some
// parameters are long, so that PostgreSQL's 8 KiB reads are full and
// messages are cut at the ends of reads and of captures; one statement is
// prepared by name on the connection. Every record is named by its
// statements (none "past the bytes captured"), they count as
// pg_stat_statements counts them, and no wire counter lost any.
func TestPgxBatchStatementsNamed(t *testing.T) {
	eachVersionAtOnce(t, nil, func(t *testing.T, c *pgsandbox.Cluster) {
		psql(t, c, "CREATE TABLE pgx_ins (id int, v text); CREATE TABLE pgx_upd (id int PRIMARY KEY, n int); "+
			"INSERT INTO pgx_upd SELECT g, 0 FROM generate_series(0, 99) g; CREATE TABLE pgx_sel (id int); "+
			"CREATE TABLE pgx_del AS SELECT g AS id FROM generate_series(0, 999) g; SELECT pg_stat_statements_reset()")
		long := func(i int) string { return strings.Repeat("v", 100+(i*379)%3000) }
		// Each returns more than the server's 8 KiB send buffer holds, so
		// that each of its sends ends one statement at most: each record
		// holds one, and counts per statement are exact.
		const reply = "repeat('r', 8300)"
		stmts := []pgxStatement{
			{"pgx_ins", "INSERT INTO pgx_ins (id, v) VALUES ($1, $2) RETURNING " + reply, func(i int) []any { return []any{i, long(i)} }},
			{"pgx_sel", "SELECT count(*), " + reply + " FROM pgx_sel WHERE id = $1", func(i int) []any { return []any{i} }},
			{"pgx_upd", "pgx_upd_named", func(i int) []any { return []any{1, i % 100} }},
			{"pgx_long", "SELECT length($1::text) AS pgx_long, " + reply + ", '" + strings.Repeat("a long statement text ", 40) + "'",
				func(i int) []any { return []any{long(i * 7)} }},
			{"pgx_del", "DELETE FROM pgx_del WHERE id = $1 RETURNING " + reply, func(i int) []any { return []any{i} }},
		}
		tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for m, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
			cfg, err := pgx.ParseConfig(connString(c))
			if err != nil {
				t.Fatal(err)
			}
			cfg.DefaultQueryExecMode = mode
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Prepare(ctx, "pgx_upd_named", "UPDATE pgx_upd SET n = n + $1 WHERE id = $2 RETURNING "+reply); err != nil {
				t.Fatal(err)
			}
			b := &pgx.Batch{}
			for i := range 500 {
				s := stmts[(i*7+i/5)%len(stmts)] // mixed, not in a fixed cycle
				b.Queue(s.sql, s.args(m*500+i)...)
			}
			if err := conn.SendBatch(ctx, b).Close(); err != nil {
				t.Fatalf("pgx batch (%v): %v", mode, err)
			}
			conn.Close(ctx)
		}
		queries, _, sum := tr.stop(t)

		theirs := map[string]int{}
		for _, line := range strings.Split(psql(t, c, "SELECT calls, query FROM pg_stat_statements WHERE query LIKE '%pgx\\_%' AND query NOT ILIKE 'create%'"), "\n") {
			calls, query, _ := strings.Cut(line, "|")
			n, _ := strconv.Atoi(calls)
			for _, s := range stmts {
				if strings.Contains(query, s.marker) {
					theirs[s.marker] += n
				}
			}
		}
		// A record of several statements (their replies went out in one
		// send) names each distinct one: a statement's count would lie
		// between the statements of the records naming it alone and those
		// of the records naming it at all. Here every send ends one at
		// most: the three agree.
		alone, among := map[string]int{}, map[string]int{}
		total, records := 0, 0
		for _, q := range queries {
			if strings.Contains(q.Query, "past the bytes captured") || strings.Contains(q.Query, "-- ") {
				t.Errorf("a record not named by its statements: %q (%d statements)", q.Query, q.Statements)
			}
			var named []string
			for _, s := range stmts {
				if strings.Contains(q.Query, s.marker) {
					named = append(named, s.marker)
					among[s.marker] += q.Statements - q.Failed
				}
			}
			if len(named) == 1 {
				alone[named[0]] += q.Statements - q.Failed
			}
			if len(named) > 0 {
				total += q.Statements - q.Failed
				records++
			}
		}
		want := 0
		for _, s := range stmts {
			t.Logf("%-8s pg_stat_statements %4d, dbiolat %4d in records of it alone, %4d in records naming it", s.marker, theirs[s.marker], alone[s.marker], among[s.marker])
			if theirs[s.marker] == 0 || alone[s.marker] != theirs[s.marker] || among[s.marker] != theirs[s.marker] {
				t.Errorf("%s: pg_stat_statements counted %d, dbiolat %d in its own records and %d in any", s.marker, theirs[s.marker], alone[s.marker], among[s.marker])
			}
			want += theirs[s.marker]
		}
		t.Logf("all: pg_stat_statements %d, dbiolat %d in %d records; wire_grouped %d", want, total, records, sum.Drops.Of("wire_grouped"))
		if total != want || want != 1000 {
			t.Errorf("dbiolat counted %d statements, pg_stat_statements %d, the batches sent 1000", total, want)
		}
		for _, name := range []string{"wire_unseen", "wire_unwalked", "wire_uncaptured", "wire_unnamed", "wire_unreadable"} {
			if n := sum.Drops.Of(name); n != 0 {
				t.Errorf("%s: %d", name, n)
			}
		}
		checkConnectionTimeline(t, queries)
	})
}
