package main

// PostgreSQL's query id in records: what the server computed for each
// statement (st_query_id), so that a record joins pg_stat_statements. Real
// drivers send statements of a few kinds, psycopg in the extended protocol
// (prepared after its fifth run) and psql as simple Queries; every record's
// queryid is pg_stat_statements' for its statement, and per queryid the
// records count what pg_stat_statements calls. A pipeline's records and a
// multi-statement Query's carry none unless they are alone in their round
// trip (the backend keeps one id at a time); with compute_query_id off,
// none, and no error.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/pgsandbox"
)

func TestQueryIDJoinsPgStatStatements(t *testing.T) {
	sideBySide(t)
	python, _ := driverTools(t)
	eachVersionAtOnce(t, nil, func(t *testing.T, c *pgsandbox.Cluster) {
		testQueryID(t, qidServer{
			version: c.Version(), pid: c.PostmasterPID(), python: python, env: c.Env(), usdt: hasUSDT(c),
			psql: func(sql string) (string, error) { return c.Psql(context.Background(), "postgres", sql) },
		})
	})
}

// qidServer is how the test reaches a server: psql's stdin (each statement
// a simple Query), and libpq's environment for psycopg.
type qidServer struct {
	version string
	pid     int
	python  string
	env     []string
	psql    func(sql string) (string, error)
	usdt    bool // its binary has USDT probes: --usdt is checked too
}

// psycopgQueryIDs runs argv[1] statements of each kind in the extended
// protocol, then as many in one pipeline.
const psycopgQueryIDs = `
import sys, psycopg
n = int(sys.argv[1])
with psycopg.connect(autocommit=True) as conn:
    for i in range(n):
        conn.execute("SELECT v FROM qid_kv WHERE k = %s", (i % 50 + 1,)).fetchall()
        conn.execute("UPDATE qid_kv SET v = v + 1 WHERE k = %s", (i % 50 + 1,))
        conn.execute("INSERT INTO qid_log (k) VALUES (%s)", (i,))
        conn.execute("SET lock_timeout = '1s'")
    with conn.pipeline():
        for i in range(n):
            conn.execute("INSERT INTO qid_pipe (k) VALUES (%s)", (i,))
`

func testQueryID(t *testing.T, s qidServer) {
	sql := func(q string) string {
		t.Helper()
		out, err := s.psql(q)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	sql("CREATE TABLE qid_kv (k int PRIMARY KEY, v int); INSERT INTO qid_kv SELECT g, 0 FROM generate_series(1, 50) g;" +
		"CREATE TABLE qid_log (k int); CREATE TABLE qid_pipe (k int); CREATE TABLE qid_off (k int)")
	sql("SELECT pg_stat_statements_reset()")

	const n = 30
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", strconv.Itoa(s.pid))
	cmd := exec.Command(s.python, "-c", psycopgQueryIDs, strconv.Itoa(n))
	cmd.Env = append(os.Environ(), s.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("psycopg: %v\n%s", err, out)
	}
	var script strings.Builder
	for i := range n {
		fmt.Fprintf(&script, "SELECT count(*) FROM qid_log WHERE k > %d;\nDELETE FROM qid_log WHERE k < %d;\nSET work_mem = '8MB';\n", i, -i)
		// One simple Query of two statements (psql's \; joins them).
		fmt.Fprintf(&script, "SELECT 1 FROM qid_kv WHERE k = %d \\; SELECT 1, 2 FROM qid_log WHERE k = %d;\n", i, i)
	}
	sql(script.String())
	// compute_query_id off for a session: its statements have no id.
	script.Reset()
	script.WriteString("SET compute_query_id = off;\n")
	for i := range n {
		fmt.Fprintf(&script, "SELECT count(*) FROM qid_off WHERE k = %d;\n", i)
	}
	sql(script.String())
	queries, _, _ := tr.stop(t)

	// pg_stat_statements' statements, by queryid.
	type pgss struct {
		query string
		calls int
	}
	theirs := map[int64]pgss{}
	for _, line := range strings.Split(sql("SELECT queryid, calls, regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements WHERE queryid IS NOT NULL"), "\n") {
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 {
			continue
		}
		id, err1 := strconv.ParseInt(f[0], 10, 64)
		calls, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			t.Fatalf("pg_stat_statements line %q", line)
		}
		theirs[id] = pgss{f[2], calls}
	}
	idOf := func(prefix string) (int64, int) { // the one statement of pg_stat_statements starting so
		t.Helper()
		var id int64
		var calls, found int
		for k, v := range theirs {
			if strings.HasPrefix(v.query, prefix) {
				id, calls, found = k, v.calls, found+1
			}
		}
		if found != 1 {
			t.Errorf("pg_stat_statements has %d statements starting %q, want 1: %v", found, prefix, theirs)
		}
		return id, calls
	}
	ours := map[int64]int{} // statements by queryid
	for _, q := range queries {
		if q.QueryID != 0 {
			ours[q.QueryID] += q.Statements - q.Failed
		}
	}

	// Each statement alone in its round trip: named by its id, every record.
	kinds := []struct {
		prefix string // of our normalized text and of pg_stat_statements'
		how    string
		// A utility statement in the extended protocol: once psycopg
		// prepared it (its fifth run), its Bind and Execute run it with no
		// query id, which pg_stat_statements then does not count either (6
		// of 30 counted, on 15 to 19 alike): those records have none.
		prepared bool
	}{
		{"SELECT v FROM qid_kv", "psycopg", false},
		{"UPDATE qid_kv", "psycopg", false},
		{"INSERT INTO qid_log", "psycopg", false},
		{"SET lock_timeout", "psycopg, a utility statement", true},
		{"SELECT count(*) FROM qid_log", "psql", false},
		{"DELETE FROM qid_log", "psql", false},
		{"SET work_mem", "psql, a utility statement", false},
	}
	for _, k := range kinds {
		id, calls := idOf(k.prefix)
		recs := matching(queries, k.prefix)
		named, count := 0, 0
		for _, q := range recs {
			count += q.Statements
			if q.QueryID == id {
				named++
			} else if q.QueryID != 0 {
				t.Errorf("%q (%s): a record has queryid %d, pg_stat_statements %d", k.prefix, k.how, q.QueryID, id)
			}
		}
		t.Logf("PostgreSQL %s, %-28q (%s): pg_stat_statements queryid %d, %d calls; dbiolat %d statements in %d records, %d named by it",
			s.version, k.prefix, k.how, id, calls, count, len(recs), named)
		if count != n || (calls != n && !k.prepared) || calls < 1 || calls > n {
			t.Errorf("%q (%s): %d sent, pg_stat_statements counted %d, dbiolat %d", k.prefix, k.how, n, calls, count)
		}
		if (named != len(recs) && !k.prepared) || named != calls || ours[id] != calls {
			t.Errorf("%q (%s): %d of %d records named by queryid %d, %d statements by it; pg_stat_statements %d calls",
				k.prefix, k.how, named, len(recs), id, ours[id], calls)
		}
	}

	// Per queryid, whatever the statement: as many as pg_stat_statements calls.
	for id, count := range ours {
		if p, ok := theirs[id]; !ok || p.calls != count {
			t.Errorf("queryid %d: dbiolat counted %d statements, pg_stat_statements %+v (known: %v)", id, count, p, ok)
		}
	}

	// A pipeline's records: counted as ever; an id only on a record alone in its round trip.
	id, calls := idOf("INSERT INTO qid_pipe")
	pipe := matching(queries, "INSERT INTO qid_pipe")
	count, named := 0, 0
	for _, q := range pipe {
		count += q.Statements
		if q.QueryID == id {
			named++
		} else if q.QueryID != 0 {
			t.Errorf("a pipeline's record has queryid %d, pg_stat_statements %d", q.QueryID, id)
		}
	}
	t.Logf("the pipeline: pg_stat_statements %d calls, dbiolat %d statements in %d records, %d named", calls, count, len(pipe), named)
	if count != n || calls != n {
		t.Errorf("the pipeline of %d: pg_stat_statements counted %d, dbiolat %d", n, calls, count)
	}

	// A simple Query of two statements: no id (the backend keeps one).
	multi := matching(queries, "SELECT $1 FROM qid_kv")
	count = 0
	for _, q := range multi {
		count += q.Statements
		if q.QueryID != 0 {
			t.Errorf("a record of a two-statement Query has queryid %d: %+v", q.QueryID, q)
		}
	}
	t.Logf("%d two-statement Queries: dbiolat %d statements in %d records, none named", n, count, len(multi))
	if count != 2*n {
		t.Errorf("%d two-statement Queries: dbiolat counted %d statements in %d records, want %d", n, count, len(multi), 2*n)
	}

	// compute_query_id off: counted, no id.
	off := matching(queries, "SELECT count(*) FROM qid_off")
	count = 0
	for _, q := range off {
		count += q.Statements
		if q.QueryID != 0 {
			t.Errorf("with compute_query_id off, a record has queryid %d", q.QueryID)
		}
	}
	t.Logf("compute_query_id off: %d sent, dbiolat %d statements in %d records, none named", n, count, len(off))
	if count != n {
		t.Errorf("with compute_query_id off, dbiolat counted %d statements, %d were sent", count, n)
	}
	checkNoWarning(t, tr.stderr.String())
	if strings.Contains(tr.stderr.String(), "queryid") {
		t.Errorf("dbiolat warned of query ids: %s", tr.stderr.String())
	}
	if !s.usdt {
		return
	}

	// With --usdt (simple Queries from the query__start/done probes): the same ids.
	id, _ = idOf("SELECT count(*) FROM qid_log")
	tr = startTrace(t, "slowlog", "--usdt", "--json", "--min-query", "0", "--pid", strconv.Itoa(s.pid))
	script.Reset()
	for i := range n {
		fmt.Fprintf(&script, "SELECT count(*) FROM qid_log WHERE k > %d;\n", i)
	}
	sql(script.String())
	queries, _, _ = tr.stop(t)
	usdt := matching(queries, "SELECT count(*) FROM qid_log")
	named = 0
	for _, q := range usdt {
		if q.QueryID == id {
			named++
		}
	}
	t.Logf("with --usdt, %d sent: dbiolat %d records, %d named by queryid %d", n, len(usdt), named, id)
	if len(usdt) != n || named != n {
		t.Errorf("with --usdt, %d sent: dbiolat %d records, %d named by pg_stat_statements' queryid %d", n, len(usdt), named, id)
	}
}
