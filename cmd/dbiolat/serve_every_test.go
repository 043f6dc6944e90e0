package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

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
	url := servingRe.FindStringSubmatch(tr.stderr.String())[1]
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
	if r := fams["dbiolat_traced_ratio"].GetMetric()[0].GetGauge().GetValue(); r != 1 {
		t.Errorf("dbiolat_traced_ratio %v, want 1: serve's default traces all the time", r)
	}
	if lost := drops(fams, true); lost != 0 {
		t.Errorf("%.0f drops that lose records or events", lost)
	}
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

// drops adds up dbiolat_drops_total of the losses (loss=true) or the
// notes.
func drops(fams map[string]*dto.MetricFamily, loss bool) float64 {
	var n float64
	for _, m := range fams["dbiolat_drops_total"].GetMetric() {
		if labelOf(m, "loss") == strconv.FormatBool(loss) {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}
