package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
)

// serve with its defaults traces every query all the time: beside a
// minute of paced pgbench (its TPC-B-like script over the simple
// protocol, its select-only one over the extended protocol),
// dbiolat_queries_total is pg_stat_statements' calls, and so is each
// query id's count in the fingerprints' series; no identity goes
// unnamed, no record is lost, and the traced ratio is 1. (pgbench -M
// prepared is left out: pg_stat_statements does not count its BEGIN and
// END, which run as prepared utility statements.)
func TestServeCountsEveryQueryByQueryID(t *testing.T) {
	sideBySide(t)
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	tr := startTrace(t, "serve", "--window", "1s", "--listen", "127.0.0.1:0", "--pid", fmt.Sprint(c.PostmasterPID()))
	url := serveMetrics(t, tr)
	runs := [][]string{
		{"-n", "-c", "1", "-M", "simple", "-R", "40"},
		{"-n", "-S", "-c", "2", "-M", "extended", "-R", "200"},
	}
	pgbench := func(seconds string) {
		done := make(chan error, len(runs))
		for _, args := range runs {
			go func() {
				_, err := c.Pgbench(ctx, "postgres", append(args, "-T", seconds)...)
				done <- err
			}()
		}
		for range runs {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2500 * time.Millisecond) // a second's tick and window: the exporter has what ran
	}
	// A series starts from zero when its fingerprint is among the busiest
	// of a window (before, its queries count as "other"): the counts are
	// compared over a minute that starts once every statement has one.
	// Twice: an application is named in the labels once it is among the
	// busiest of a window too, and its statements' series then start anew.
	pgbench("2")
	pgbench("2")
	ours0, queries0 := servedCalls(scrape(t, url))
	before, beforeTotal := statementCalls(t, c)
	pgbench("60")
	fams := scrape(t, url)
	ours1, queries1 := servedCalls(fams)
	after, afterTotal := statementCalls(t, c)

	// The minute's queries, and the test's first read of
	// pg_stat_statements, which it leaves out of their count.
	ran, queries := afterTotal-beforeTotal, queries1-queries0-1
	t.Logf("dbiolat_queries_total +%.0f, pg_stat_statements +%.0f calls of %d query ids", queries, ran, len(after))
	if queries != ran {
		t.Errorf("serve counted %.0f queries, pg_stat_statements %.0f", queries, ran)
	}
	for _, id := range slices.Sorted(maps.Keys(after)) {
		theirs, ours := after[id]-before[id], ours1[id]-ours0[id]
		if theirs == 0 && ours == 0 {
			continue
		}
		t.Logf("queryid %20s: pg_stat_statements %6.0f, dbiolat %6.0f", id, theirs, ours)
		if ours != theirs {
			t.Errorf("queryid %s: dbiolat counted %.0f, pg_stat_statements %.0f", id, ours, theirs)
		}
	}
	// Counted without a query id, or unnamed: none. (The series "other"
	// holds the test's own read of pg_stat_statements, among the busiest
	// of no window.)
	if n := ours1[""] - ours0[""]; n != 0 {
		t.Errorf("%.0f queries counted without a query id", n)
	}
	if n := ours1[model.UnnamedFingerprint]; n != 0 {
		t.Errorf("%.0f queries counted under no name", n)
	}
	// Counted in the kernel: records only of each identity's first on a
	// CPU (a few dozen), not of every query.
	if recs := fams["dbiolat_query_records_total"].GetMetric()[0].GetCounter().GetValue(); recs > 0.01*queries {
		t.Errorf("%.0f query records for %.0f queries: the kernel should have counted them", recs, queries)
	}
	if r := fams["dbiolat_traced_ratio"].GetMetric()[0].GetGauge().GetValue(); r != 1 {
		t.Errorf("dbiolat_traced_ratio %v, want 1: serve's default traces all the time", r)
	}
	checkNoLoss(t, fams)
	tr.stopText(t)
}

// statementCalls are pg_stat_statements' calls by query id (but for its
// own queries), and their sum.
func statementCalls(t *testing.T, c *pgsandbox.Cluster) (map[string]float64, float64) {
	t.Helper()
	calls := map[string]float64{}
	var total float64
	for _, line := range strings.Split(psql(t, c, "SELECT queryid, sum(calls) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' GROUP BY queryid"), "\n") {
		if line == "" { // none yet
			continue
		}
		id, n, ok := strings.Cut(line, "|")
		v, err := strconv.ParseFloat(n, 64)
		if !ok || err != nil {
			t.Fatalf("pg_stat_statements: %q", line)
		}
		calls[id] += v
		total += v
	}
	return calls, total
}

// servedCalls are serve's fingerprint series' calls by query id (those
// without one under ""; "other" and those unnamed under their
// fingerprint), and dbiolat_queries_total.
func servedCalls(fams map[string]*dto.MetricFamily) (map[string]float64, float64) {
	calls := map[string]float64{}
	for _, m := range fams["dbiolat_fingerprint_calls_total"].GetMetric() {
		switch fp := labelOf(m, "fingerprint"); fp {
		case model.OtherFingerprint, model.UnnamedFingerprint:
			calls[fp] += m.GetCounter().GetValue()
		default:
			calls[labelOf(m, "queryid")] += m.GetCounter().GetValue()
		}
	}
	return calls, fams["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
}

// checkNoLoss: serve counted no drop that loses records or events
// (dbiolat_drops_total{loss="true"}).
func checkNoLoss(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	var lost float64
	for _, m := range fams["dbiolat_drops_total"].GetMetric() {
		if labelOf(m, "loss") == "true" {
			lost += m.GetCounter().GetValue()
		}
	}
	if lost != 0 {
		t.Errorf("%.0f drops that lose records or events", lost)
	}
}

// The same on MariaDB, whose statements have no id of the server's: the
// kernel counts each under its text without literals, so a statement run
// with 300 values is one series of 300 calls, and dbiolat_queries_total
// is the statements the server counted (Com_*).
func TestServeCountsEveryMariaDBStatement(t *testing.T) {
	sideBySide(t)
	s := startMariaDB(t, nil)
	ctx := mysqlContext(t)
	tr := startTrace(t, "serve", "--window", "1s", "--listen", "127.0.0.1:0", "--pid", fmt.Sprint(s.PID()))
	url := serveMetrics(t, tr)
	script := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "SELECT %d AS shape_a;\nSELECT 'x%d' AS shape_b, %d.5 AS y;\n", i, i*7, i)
		}
		return b.String()
	}
	run := func(n int) {
		if _, err := s.SQL(ctx, "", script(n)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond) // a tick and a window: the shapes' series are admitted
	}
	calls := func(fams map[string]*dto.MetricFamily) map[string]float64 { return callsByText(t, url, fams) }
	run(20)
	run(20) // the client's program name admitted as an application too
	fams0 := scrape(t, url)
	ours0, q0 := calls(fams0), fams0["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
	before := comCounters(t, s)
	run(300)
	fams := scrape(t, url)
	ours1, q1 := calls(fams), fams["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
	after := comCounters(t, s)
	var ran uint64 // the statements the server counted, but its counters' own reading
	for k, v := range after {
		if strings.HasPrefix(k, "com_") && k != "com_show_status" {
			ran += v - before[k]
		}
	}
	// The minute's statements, and the test's first reading of the
	// counters (SHOW STATUS), which it leaves out of theirs.
	queries := q1 - q0 - 1
	t.Logf("dbiolat_queries_total +%.0f; the server counted %d statements (Com_*)", queries, ran)
	if queries != float64(ran) {
		t.Errorf("serve counted %.0f statements, the server %d", queries, ran)
	}
	for text, want := range map[string]float64{"SELECT ? AS shape_a": 300, "SELECT ? AS shape_b, ? AS y": 300} {
		if got := ours1[text] - ours0[text]; got != want {
			t.Errorf("%q: %.0f calls in its series, want %.0f (each run with other values is the same statement): %v", text, got, want, ours1)
		}
	}
	checkNoLoss(t, fams)
	checkFewRecords(t, fams)
	tr.stopText(t)
}

// checkFewRecords: the kernel counted the statements, sending records only
// of each identity's first on a CPU and of those it could not count (a
// client's own few): at most one in twenty here, a share that falls as the
// statements repeat.
func checkFewRecords(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	recs := fams["dbiolat_query_records_total"].GetMetric()[0].GetCounter().GetValue()
	queries := fams["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
	if recs > 0.05*queries {
		t.Errorf("%.0f query records for %.0f queries: the kernel should have counted them", recs, queries)
	}
}

// callsByText are the fingerprint series' calls by their normalized text
// (serve's /queries; the series "other" under "").
func callsByText(t *testing.T, url string, fams map[string]*dto.MetricFamily) map[string]float64 {
	t.Helper()
	texts := map[string]string{}
	if err := json.Unmarshal([]byte(getBody(t, strings.TrimSuffix(url, "/metrics")+"/queries")), &texts); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, m := range fams["dbiolat_fingerprint_calls_total"].GetMetric() {
		out[texts[labelOf(m, "fingerprint")]] += m.GetCounter().GetValue()
	}
	return out
}

// getBody reads a URL's body.
func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Without the server's query ids (compute_query_id = off), serve counts
// each statement under its text without literals, or its prepared
// statement: psycopg's three ways of sending a statement, each run 300
// times with other values, are 300 calls in one series each.
func TestServeCountsWithoutQueryIDs(t *testing.T) {
	sideBySide(t)
	python, _ := driverTools(t)
	c := startPG(t, map[string]string{"compute_query_id": "off", "shared_preload_libraries": ""})
	tr := startTrace(t, "serve", "--window", "1s", "--listen", "127.0.0.1:0", "--pid", fmt.Sprint(c.PostmasterPID()))
	url := serveMetrics(t, tr)
	run := func(n int) {
		cmd := exec.Command(python, filepath.Join("testdata", "drivers", "pg_shapes.py"), strconv.Itoa(n))
		cmd.Env = append(os.Environ(), c.Env()...)
		if _, err := cmdrun.Run(cmd, nil, "pg_shapes.py"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond) // a tick and a window: the shapes' series are admitted
	}
	calls := func() (map[string]float64, float64) {
		fams := scrape(t, url)
		for _, m := range fams["dbiolat_fingerprint_calls_total"].GetMetric() {
			if labelOf(m, "queryid") != "" {
				t.Errorf("a series with a query id (%s), the server computes none", labelOf(m, "queryid"))
			}
		}
		return callsByText(t, url, fams), fams["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
	}
	run(20)
	run(20) // the application admitted too
	ours0, q0 := calls()
	run(300)
	ours1, q1 := calls()
	checkFewRecords(t, scrape(t, url))
	t.Logf("dbiolat_queries_total +%.0f; by statement %v", q1-q0, ours1)
	if q1-q0 != 900 {
		t.Errorf("serve counted %.0f statements, psycopg sent 900", q1-q0)
	}
	for _, text := range []string{"SELECT $1::int AS shape_x", "SELECT $1::int + $2 AS shape_y", "SELECT $1 AS shape_z"} {
		if got := ours1[text] - ours0[text]; got != 300 {
			t.Errorf("%q: %.0f calls in its series, want 300", text, got)
		}
	}
	tr.stopText(t)
}

// Round trips that run several statements (a pipeline, a batch, a Query
// of several) are counted in the kernel too when their statements are in
// the captured messages, under their identity (statements of one text:
// that statement's; of several: their texts' or names' in order), not
// sent to Go a record each. Beside libpq's pipeline mode (pgbench: ten
// SELECTs of one text a Sync, and five INSERTs with five SELECTs) serve
// sends a record of each identity's first on a CPU, not one a round trip,
// and the pipelines' series count their 6,000 statements. Beside real
// drivers (pgJDBC's batch and psycopg's pipeline, long ones read in parts,
// whose statements go as records; psycopg's executemany and a Query of
// several) dbiolat_queries_total grows by pg_stat_statements' calls.
func TestServeCountsPipelinesInTheKernel(t *testing.T) {
	sideBySide(t)
	python, jars := driverTools(t)
	port := freePort(t)
	c := startPG(t, map[string]string{"listen_addresses": "127.0.0.1", "port": strconv.Itoa(port)})
	psql(t, c, "CREATE TABLE drv_libpq (id int, v text)")
	dir := reachableTempDir(t, "serve-pipeline-")
	var scripts []string
	for i, body := range []string{
		strings.Repeat("SELECT count(*) FROM drv_libpq WHERE id = :client_id;\n", 10),
		strings.Repeat("INSERT INTO drv_libpq VALUES (:client_id, 'x');\nSELECT v FROM drv_libpq WHERE id = :client_id LIMIT 1;\n", 5),
	} {
		script := filepath.Join(dir, fmt.Sprintf("pipeline%d.sql", i))
		if err := os.WriteFile(script, []byte("\\startpipeline\n"+body+"\\endpipeline\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, script)
	}
	tr := startTrace(t, "serve", "--window", "1s", "--listen", "127.0.0.1:0", "--pid", fmt.Sprint(c.PostmasterPID()))
	url := serveMetrics(t, tr)
	pipelines := func(n int) {
		for _, script := range scripts {
			if _, err := c.Pgbench(context.Background(), "postgres", "-n", "-M", "extended", "-f", script, "-t", strconv.Itoa(n)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2500 * time.Millisecond) // a tick and a window: the pipelines' series are admitted
	}
	// Every statement counted, by the kernel or from records: the
	// drivers' beside pg_stat_statements' calls (but for the test's
	// first read of them, left out of theirs).
	fams0 := scrape(t, url)
	_, beforeTotal := statementCalls(t, c)
	for _, dc := range []driverCase{{"pgjdbc", "batch", nil}, {"psycopg", "pipeline", nil}, {"psycopg", "executemany", nil},
		{"psycopg", "multi", nil}} {
		runDriver(t, c, dc, python, jars, port, nil)
	}
	pipelines(30)
	pipelines(30)
	fams1 := scrape(t, url)
	_, afterTotal := statementCalls(t, c)
	queries, ran := counter(fams1, "dbiolat_queries_total")-counter(fams0, "dbiolat_queries_total")-1, afterTotal-beforeTotal
	t.Logf("drivers: dbiolat_queries_total +%.0f in %.0f records, pg_stat_statements +%.0f calls", queries, counter(fams1, "dbiolat_query_records_total")-counter(fams0, "dbiolat_query_records_total"), ran)
	if queries != ran {
		t.Errorf("serve counted %.0f statements, pg_stat_statements %.0f", queries, ran)
	}

	// The pipelines' 600 round trips: their series have their 6,000
	// statements, and records are a few.
	ours0 := callsByText(t, url, fams1)
	pipelines(300)
	fams2 := scrape(t, url)
	ours1 := callsByText(t, url, fams2)
	var statements float64
	for text, n := range ours1 {
		if strings.Contains(text, "drv_libpq") {
			statements += n - ours0[text]
		}
	}
	records := counter(fams2, "dbiolat_query_records_total") - counter(fams1, "dbiolat_query_records_total")
	t.Logf("the pipelines: %.0f statements in their series, %.0f records", statements, records)
	if statements != 6000 {
		t.Errorf("the pipelines' series counted %.0f statements, pgbench sent 6000", statements)
	}
	if records > 60 { // a tenth of the round trips: each identity's first on each CPU, pgbench's own few statements
		t.Errorf("%.0f query records for 600 round trips of 10 statements: the kernel should have counted them", records)
	}
	if n := ours1[model.UnnamedFingerprint]; n != 0 {
		t.Errorf("%.0f statements counted under no name", n)
	}
	checkNoLoss(t, fams2)
	tr.stopText(t)
}

func counter(fams map[string]*dto.MetricFamily, name string) float64 {
	return fams[name].GetMetric()[0].GetCounter().GetValue()
}
