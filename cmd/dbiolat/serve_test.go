package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
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
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	psql(t, c, "SELECT pg_stat_statements_reset()")
	tr := startTrace(t, "serve", "--pid", fmt.Sprint(c.PostmasterPID()))
	m := servingRe.FindStringSubmatch(tr.stderr.String())
	if m == nil || !strings.HasPrefix(m[1], "http://127.0.0.1:") {
		t.Fatalf("serve does not say it serves on the loopback: %s", tr.stderr.String())
	}
	if _, err := c.Pgbench(ctx, "postgres", "-n", "-S", "-c", "2", "-t", "300"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // a second's tick passes: the exporter has what ran
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
	// Its own cost: the process's CPU and memory, and the share traced.
	if value("process_cpu_seconds_total") <= 0 || fams["process_resident_memory_bytes"] == nil ||
		fams["dbiolat_traced_ratio"].GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("serve's self-metrics are missing")
	}
	tr.stopText(t)
}
