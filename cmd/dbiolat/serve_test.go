package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// servingRe is serve's line saying where its metrics are.
var servingRe = regexp.MustCompile(`Serving metrics on (http://\S+/metrics)`)

// scrape reads an exporter's metrics as Prometheus would.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("the exporter's metrics do not parse: %v\n%s", err, body)
	}
	return fams
}

// serve, by default on the loopback only, counts every query pgbench ran
// as pg_stat_statements counts them, and its query histogram holds as
// many; its metrics parse as Prometheus's text format.
func TestServeCountsQueries(t *testing.T) {
	sideBySide(t)
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	psql(t, c, "SELECT pg_stat_statements_reset()")
	tr := startTrace(t, "serve", "--duty", "off", "--window", "1s", "--pid", fmt.Sprint(c.PostmasterPID()))
	m := servingRe.FindStringSubmatch(tr.stderr.String())
	if m == nil || !strings.HasPrefix(m[1], "http://127.0.0.1:") {
		t.Fatalf("serve does not say it serves on the loopback: %s", tr.stderr.String())
	}
	if _, err := c.Pgbench(ctx, "postgres", "-n", "-S", "-c", "2", "-t", "300"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // a second's tick and a window pass: the exporter has what ran
	fams := scrape(t, m[1])
	ran, err := strconv.ParseFloat(psql(t, c, "SELECT sum(calls) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'"), 64)
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) float64 {
		f := fams[name]
		if f == nil || len(f.GetMetric()) == 0 {
			t.Fatalf("no %s in the metrics", name)
		}
		return f.GetMetric()[0].GetCounter().GetValue()
	}
	queries := value("dbiolat_queries_total")
	h := fams["dbiolat_query_duration_seconds"].GetMetric()[0].GetHistogram()
	t.Logf("dbiolat_queries_total %.0f, query histogram %d, pg_stat_statements %.0f calls", queries, h.GetSampleCount(), ran)
	if queries != ran || float64(h.GetSampleCount()) != queries {
		t.Errorf("serve counted %.0f queries (histogram %d); pg_stat_statements %.0f", queries, h.GetSampleCount(), ran)
	}
	// The fingerprints' series add up to every query; pgbench's SELECT, the
	// busiest, has one, its text normalized.
	var calls float64
	for _, m := range fams["dbiolat_fingerprint_calls_total"].GetMetric() {
		calls += m.GetCounter().GetValue()
	}
	if calls != queries {
		t.Errorf("the fingerprints' calls add up to %.0f, of %.0f queries", calls, queries)
	}
	resp, err := http.Get(strings.TrimSuffix(m[1], "/metrics") + "/queries")
	if err != nil {
		t.Fatal(err)
	}
	var texts map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&texts); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !slices.ContainsFunc(slices.Collect(maps.Values(texts)), func(q string) bool {
		return strings.HasPrefix(q, "SELECT abalance FROM pgbench_accounts WHERE aid = $1")
	}) {
		t.Errorf("/queries lacks pgbench's SELECT: %v", texts)
	}
	if resp, err := http.Get(strings.TrimSuffix(m[1], "/metrics") + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %v %v", resp, err)
	}
	// Its own cost: the process's CPU and memory, and the share traced.
	if value("process_cpu_seconds_total") <= 0 || fams["process_resident_memory_bytes"] == nil ||
		fams["dbiolat_traced_ratio"].GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("serve's self-metrics are missing")
	}
	// Without --fs, no file system layer, and the series say so.
	if got := layersTraced(fams); got["fs"] || !got["wire"] || !got["sched"] || !got["block"] {
		t.Errorf("dbiolat_layer_traced %v: want wire, sched and block, not fs", got)
	}
	if n := len(fams["dbiolat_fs_read_duration_seconds"].GetMetric()); n != 0 {
		t.Errorf("%d file system read histograms without --fs", n)
	}
	tr.stopText(t)
}

// layersTraced is serve's dbiolat_layer_traced gauges: layer -> traced.
func layersTraced(fams map[string]*dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for _, m := range fams["dbiolat_layer_traced"].GetMetric() {
		out[labelOf(m, "layer")] = m.GetGauge().GetValue() == 1
	}
	return out
}

// 100,000 distinct statements: the fingerprints' series stay within the
// bound (--top and "other"), and add up to every statement.
func TestServeFingerprintsBounded(t *testing.T) {
	sideBySide(t)
	c := startPG(t, nil)
	const top, statements = 10, 100000
	tr := startTrace(t, "serve", "--duty", "off", "--listen", "127.0.0.1:0", "--top", fmt.Sprint(top), "--window", "1s", "--pid", fmt.Sprint(c.PostmasterPID()))
	url := servingRe.FindStringSubmatch(tr.stderr.String())[1]
	// Two sessions, half each (the machine has two CPUs).
	const sessions = 2
	done := make(chan error, sessions)
	for s := range sessions {
		var script strings.Builder
		for i := s; i < statements; i += sessions {
			fmt.Fprintf(&script, "SELECT %d AS c%d;\n", i, i) // the alias makes each its own fingerprint
		}
		cmd := c.PsqlCmd(context.Background(), "postgres", "-q", "-o", "/dev/null", "-v", "ON_ERROR_STOP=1")
		cmd.Stdin = strings.NewReader(script.String()) // psql runs as the server's user: no file of ours
		go func() {
			if out, err := cmd.CombinedOutput(); err != nil {
				done <- fmt.Errorf("psql: %v: %s", err, out)
				return
			}
			done <- nil
		}()
	}
	most := 0
	for running := sessions; running > 0; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if running--; running == 0 {
				time.Sleep(2500 * time.Millisecond) // the last tick and window
			}
		case <-time.After(time.Second):
		}
		series := len(scrape(t, url)["dbiolat_fingerprint_calls_total"].GetMetric())
		most = max(most, series)
		if series > top+1 {
			t.Fatalf("%d fingerprint series, want at most %d", series, top+1)
		}
	}
	fams := scrape(t, url)
	var calls float64
	for _, m := range fams["dbiolat_fingerprint_calls_total"].GetMetric() {
		calls += m.GetCounter().GetValue()
	}
	queries := fams["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
	t.Logf("%d statements: at most %d series; the series add up to %.0f calls, of %.0f queries", statements, most, calls, queries)
	if calls != queries || queries < statements {
		t.Errorf("the series add up to %.0f calls, of %.0f queries (%d statements run)", calls, queries, statements)
	}
	tr.stopText(t)
}

// serve outlives its database: connection churn (a connection per
// transaction) and a restart leave its series bounded, and once it says
// the server is back it counts every query again, as pg_stat_statements.
func TestServeSurvivesRestartAndChurn(t *testing.T) {
	sideBySide(t)
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	tr := startTrace(t, "serve", "--fs", "--duty", "off", "--listen", "127.0.0.1:0", "--window", "1s", "--pid", fmt.Sprint(c.PostmasterPID()))
	url := servingRe.FindStringSubmatch(tr.stderr.String())[1]
	churn := func() {
		if _, err := c.Pgbench(ctx, "postgres", "-n", "-S", "-C", "-c", "2", "-t", "200"); err != nil {
			t.Fatal(err)
		}
	}
	churn()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	back := fmt.Sprintf("is back as pid %d", c.PostmasterPID())
	waitFor(t, "serve to find the restarted server", func() bool { return strings.Contains(tr.stderr.String(), back) })
	psql(t, c, "SELECT pg_stat_statements_reset()")
	time.Sleep(1500 * time.Millisecond)
	before := scrape(t, url)["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
	churn()
	time.Sleep(2500 * time.Millisecond)
	fams := scrape(t, url)
	after := fams["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
	ran, err := strconv.ParseFloat(psql(t, c, "SELECT sum(calls) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'"), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the restart: %.0f queries counted, pg_stat_statements %.0f calls; %d I/O series, %d fingerprint series",
		after-before, ran, len(fams["dbiolat_io_operations_total"].GetMetric()), len(fams["dbiolat_fingerprint_calls_total"].GetMetric()))
	if after-before != ran {
		t.Errorf("serve counted %.0f queries after the restart, pg_stat_statements %.0f", after-before, ran)
	}
	// 800 connections came and went: the series are by role, not by process.
	if n := len(fams["dbiolat_io_operations_total"].GetMetric()); n > 100 {
		t.Errorf("%d I/O series after 800 connections", n)
	}
	if !layersTraced(fams)["fs"] {
		t.Errorf("serve --fs: dbiolat_layer_traced says fs is not traced: %v", layersTraced(fams))
	}
	checkRoleHists(t, fams, "client backend")
	tr.stopText(t)
}

// labelOf is a metric's value of a label ("" if it has none).
func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// checkRoleHists checks the file system histograms by role against the
// operation counters: every read of a role's processes, the exited ones'
// folded in, is in its histograms once, as a page-cache hit or a miss,
// under its server's name, even for a process that began and ended
// between two readings. (The role must be idle: the two are read one
// after the other.)
func checkRoleHists(t *testing.T, fams map[string]*dto.MetricFamily, role string) {
	t.Helper()
	count := func(family string) (n uint64) {
		for _, m := range fams[family].GetMetric() {
			if labelOf(m, "role") == role {
				n += m.GetHistogram().GetSampleCount()
				if labelOf(m, "server") == "" {
					t.Errorf("%s%v: no server named", family, m.GetLabel())
				}
			}
		}
		return n
	}
	reads, hits, misses := count("dbiolat_fs_read_duration_seconds"), count("dbiolat_fs_read_hit_duration_seconds"), count("dbiolat_fs_read_miss_duration_seconds")
	var ops uint64
	for _, m := range fams["dbiolat_io_operations_total"].GetMetric() {
		if labelOf(m, "role") == role && labelOf(m, "layer") == "fs" && labelOf(m, "op") == "read" {
			ops += uint64(m.GetCounter().GetValue())
		}
	}
	t.Logf("%s: %d reads counted; the histograms hold %d (%d hits, %d misses) in %d series", role, ops, reads, hits, misses, len(fams["dbiolat_fs_read_duration_seconds"].GetMetric()))
	if ops == 0 || reads != ops || hits+misses != ops {
		t.Errorf("%s: %d reads counted, the histogram holds %d (%d hits, %d misses)", role, ops, reads, hits, misses)
	}
}

// In duty cycles (1 s traced in every 3 here), serve's counters estimate
// the whole time: what pgbench ran at a steady rate, as
// pg_stat_statements counts it, within 15% (the traced seconds' Poisson
// noise is about 3% over six cycles). Queries that crossed a pause, long
// sleeps caught by it, are left out and counted, never measured in part:
// no query in the histogram is longer than the sleeps.
func TestServeDutyCycles(t *testing.T) {
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	psql(t, c, "SELECT pg_stat_statements_reset()")
	tr := startTrace(t, "serve", "--duty", "1s/3s", "--listen", "127.0.0.1:0", "--window", "1s", "--pid", fmt.Sprint(c.PostmasterPID()))
	url := servingRe.FindStringSubmatch(tr.stderr.String())[1]
	start := time.Now()
	done := make(chan error, 2)
	go func() {
		_, err := c.Pgbench(ctx, "postgres", "-n", "-S", "-c", "2", "-R", "200", "-T", "22")
		done <- err
	}()
	go func() { // each 0.7 s, so that pauses catch some in the middle
		_, err := c.Psql(ctx, "postgres", strings.Repeat("SELECT pg_sleep(0.7);\n", 30))
		done <- err
	}()
	total := func(fams map[string]*dto.MetricFamily) float64 {
		return fams["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
	}
	time.Sleep(time.Until(start.Add(18 * time.Second)))
	// Read at a pause, when the cycle just measured is counted: the
	// estimate covers the time until now, as pg_stat_statements does.
	last := total(scrape(t, url))
	var fams map[string]*dto.MetricFamily
	waitFor(t, "serve to measure a cycle", func() bool {
		fams = scrape(t, url)
		return total(fams) != last
	})
	ran, err := strconv.ParseFloat(psql(t, c, "SELECT sum(calls) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'"), 64)
	if err != nil {
		t.Fatal(err)
	}
	estimate := total(fams)
	ratio := fams["dbiolat_traced_ratio"].GetMetric()[0].GetGauge().GetValue()
	var cut float64
	for _, m := range fams["dbiolat_drops_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "kind" && l.GetValue() == "query_cut" {
				cut = m.GetCounter().GetValue()
			}
		}
	}
	h := fams["dbiolat_query_duration_seconds"].GetMetric()[0].GetHistogram()
	var underSecond, underHalf uint64 // queries measured at most ~1.07 s, ~0.54 s long
	for _, b := range h.GetBucket() {
		switch le := b.GetUpperBound(); {
		case le < 0.6:
			underHalf = b.GetCumulativeCount()
		case le < 1.1:
			underSecond = b.GetCumulativeCount()
		}
	}
	t.Logf("after %v: dbiolat_queries_total %.0f, pg_stat_statements %.0f (%.3f); traced ratio %.3f; %v queries cut; histogram %d queries, %d under 0.54 s, %d under 1.07 s",
		time.Since(start).Round(time.Millisecond), estimate, ran, estimate/ran, ratio, cut, h.GetSampleCount(), underHalf, underSecond)
	if estimate < 0.85*ran || estimate > 1.15*ran {
		t.Errorf("serve estimates %.0f queries, pg_stat_statements counted %.0f: off by more than 15%%", estimate, ran)
	}
	// A second of three, and up to a tick (0.1 s) more, and what the
	// shared machine delays the loop by: 1/3 to 1/2 (0.03 under 1/3 for
	// a cycle measured a little long).
	if ratio < 0.3 || ratio > 0.5 {
		t.Errorf("traced ratio %.3f, want 1/3 to 1/2", ratio)
	}
	if cut == 0 {
		t.Errorf("no query cut by a pause, though one was always sleeping")
	}
	if underSecond != h.GetSampleCount() || underSecond == underHalf {
		t.Errorf("the histogram holds %d queries over 1.07 s (a sleep measured across a pause), and %d sleeps (0.54-1.07 s)",
			h.GetSampleCount()-underSecond, underSecond-underHalf)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	tr.stopText(t)
}
