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
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var cmd *exec.Cmd
		switch dc.driver {
		case "psycopg":
			cmd = exec.CommandContext(ctx, python, filepath.Join("testdata", "drivers", "pg_psycopg.py"), dc.name)
			cmd.Env = append(os.Environ(), c.Env()...)
		case "pgjdbc":
			url := fmt.Sprintf("jdbc:postgresql://127.0.0.1:%d/postgres?user=postgres", port)
			cmd = exec.CommandContext(ctx, "java", "-cp", jars.pgjdbc, filepath.Join("testdata", "drivers", "PgJdbc.java"), url, dc.name)
		case "libpq":
			psql(t, c, "CREATE TABLE drv_libpq (id int, v text)")
			cmd = c.PgbenchCmd(ctx, "postgres", "-n", "-M", "extended", "-f", script, "-t", "30")
		}
		_, err := cmdrun.Run(cmd, nil, dc.driver)
		cancel()
		if err != nil {
			t.Fatalf("%s %s: %v", dc.driver, dc.name, err)
		}
	}
	queries, _, sum := tr.stop(t)

	// pg_stat_statements counts the statements that succeeded.
	theirs := map[string]int{}
	for _, line := range strings.Split(psql(t, c, "SELECT calls, query FROM pg_stat_statements WHERE query LIKE '%drv\\_%'"), "\n") {
		calls, query, _ := strings.Cut(line, "|")
		n, _ := strconv.Atoi(calls)
		for _, dc := range cases {
			if dc.marker.MatchString(query) {
				theirs[dc.driver+" "+dc.name] += n
			}
		}
	}
	for _, dc := range cases {
		ours, failed, records := 0, 0, 0
		for _, q := range queries {
			if dc.marker.MatchString(q.Query) {
				ours += q.Statements - q.Failed
				failed += q.Failed
				records++
			}
		}
		t.Logf("%-8s %-12s pg_stat_statements %4d, dbiolat %4d (+%d failed) in %d records", dc.driver, dc.name, theirs[dc.driver+" "+dc.name], ours, failed, records)
		if ours != theirs[dc.driver+" "+dc.name] || theirs[dc.driver+" "+dc.name] == 0 {
			t.Errorf("%s %s: dbiolat counted %d statements that succeeded, pg_stat_statements %d", dc.driver, dc.name, ours, theirs[dc.driver+" "+dc.name])
		}
		if want := map[string]int{"error": 1}[dc.name]; failed != want {
			t.Errorf("%s %s: %d statements failed, want %d", dc.driver, dc.name, failed, want)
		}
	}
	for _, q := range queries {
		if strings.TrimSpace(q.Query) == "" || strings.HasPrefix(q.Query, "-- ") {
			t.Errorf("a record without its statement's text: %q (%d statements)", q.Query, q.Statements)
		}
	}
	checkConnectionTimeline(t, queries)
	if n := sum.Drops.Of("wire_unseen") + sum.Drops.Of("wire_unwalked"); n != 0 {
		t.Errorf("round trips not seen or not walked: %d", n)
	}
	t.Logf("statements timed in groups: %d", sum.Drops.Of("wire_grouped"))
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
