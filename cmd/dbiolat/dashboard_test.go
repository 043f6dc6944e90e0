package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dashboard is the part of the Grafana dashboard the test reads.
type dashboard struct {
	Panels []struct {
		Title   string
		Targets []struct{ Expr string }
	}
}

// Two real Prometheus servers scrape serve while pgbench and a cold scan
// run: Debian's (2.42) and a Prometheus 3 (make test builds it) that turns
// the classic histograms into native ones as it scrapes them. Every
// panel's expression in the Grafana dashboard returns data through both
// HTTP APIs, and the native histograms are the classic ones: the same
// bounds, counts and quantiles.
func TestDashboardQueriesReturnData(t *testing.T) {
	prom2, err := exec.LookPath("prometheus")
	prom3, err3 := filepath.Abs("../../.tools/prometheus3")
	if err3 == nil {
		_, err3 = os.Stat(prom3)
	}
	if err = cmp.Or(err, err3); err != nil && os.Getenv("CI") != "true" {
		t.Skip("Prometheus 2 or 3 is missing (make test installs both)")
	}
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	b, err := os.ReadFile("../../deploy/grafana/dbiolat.json")
	if err == nil {
		err = json.Unmarshal(b, &d)
	}
	if err != nil || len(d.Panels) == 0 {
		t.Fatalf("the dashboard: %v", err)
	}
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "5"); err != nil {
		t.Fatal(err)
	}
	// --fs: the dashboard's file system panels (page-cache hits, I/O
	// latency by role) need the fs layer's series.
	tr := startTrace(t, "serve", "--fs", "--duty", "off", "--listen", "127.0.0.1:0", "--window", "1s", "--pid", fmt.Sprint(c.PostmasterPID()))
	target := strings.TrimSuffix(strings.TrimPrefix(servingRe.FindStringSubmatch(tr.stderr.String())[1], "http://"), "/metrics")
	job := fmt.Sprintf("scrape_configs:\n  - job_name: dbiolat\n    static_configs: [{targets: [%q]}]\n", target)
	proms := []*promServer{
		startPrometheus(t, "Prometheus 2", prom2, "global: {scrape_interval: 1s}\n"+job),
		startPrometheus(t, "Prometheus 3", prom3, "global: {scrape_interval: 1s, scrape_native_histograms: true, "+
			"convert_classic_histograms_to_nhcb: true, always_scrape_classic_histograms: true}\n"+job),
	}

	// The workload: cached reads (pgbench select-only), then a cold scan's
	// file system reads and block requests, then writes: a commit's WAL,
	// and a checkpoint's writes and syncs.
	if _, err := c.Pgbench(ctx, "postgres", "-n", "-S", "-c", "2", "-T", "3"); err != nil {
		t.Fatal(err)
	}
	dropCaches(t)
	psql(t, c, "SELECT count(*) FROM pgbench_accounts")
	psql(t, c, "UPDATE pgbench_branches SET bbalance = bbalance + 1")
	psql(t, c, "CHECKPOINT")
	// Both have scraped serve enough for rates over a minute.
	for _, p := range proms {
		waitFor(t, p.name+" to scrape serve", func() bool {
			r := p.query(t, `count_over_time(dbiolat_queries_total[1m])`)
			if len(r) == 0 {
				return false
			}
			n, _ := strconv.ParseFloat(r[0].Value[1], 64)
			return n >= 5
		})
	}
	time.Sleep(3 * time.Second) // the cold scan's interval scraped too
	for _, p := range proms {
		for _, panel := range d.Panels {
			for _, target := range panel.Targets {
				expr := dashboardVar.ReplaceAllString(target.Expr, ".*") // the variables ($job, $server) at "All"
				// The kernel's first count of our programs' run time ends a
				// duty period after 2 s in (session.sampleFirst): until
				// then the ratio is absent, not 0.
				if r := p.query(t, expr); len(r) == 0 && expr != "dbiolat_bpf_cpu_ratio" {
					t.Errorf("%s: panel %q: %s returns no data", p.name, panel.Title, expr)
				}
			}
		}
	}
	checkNativeHistograms(t, proms[1])
	if t.Failed() {
		for _, p := range proms {
			t.Logf("%s's log:\n%s", p.name, p.log.String())
		}
	}
	tr.stopText(t)
}

// checkNativeHistograms compares, at one instant, Prometheus 3's native
// histograms of query latency with the classic ones it also kept: the
// same scrapes, so the same counts, each native bucket bounded where a
// classic one is, and the same quantiles (both interpolate linearly
// within a bucket; the margin is for floating point only).
func checkNativeHistograms(t *testing.T, p *promServer) {
	t.Helper()
	at := strconv.FormatInt(time.Now().Unix(), 10)
	native := p.queryAt(t, `dbiolat_query_duration_seconds`, at)
	if len(native) == 0 || native[0].Histogram == nil {
		t.Fatalf("%s: no native histogram of query latency: %+v", p.name, native)
	}
	bounds := map[float64]bool{}
	for _, s := range p.queryAt(t, `dbiolat_query_duration_seconds_bucket`, at) {
		le, _ := strconv.ParseFloat(s.Metric["le"], 64)
		bounds[le] = true
	}
	for _, h := range native {
		labels := fmt.Sprintf(`{server=%q,database=%q}`, h.Metric["server"], h.Metric["database"])
		classic := p.queryAt(t, `dbiolat_query_duration_seconds_count`+labels, at)
		if len(classic) != 1 || classic[0].Value[1] != h.Histogram.Count {
			t.Errorf("%s %s: native count %s, classic %+v", p.name, labels, h.Histogram.Count, classic)
		}
		for _, b := range h.Histogram.Buckets {
			upper, _ := strconv.ParseFloat(b[2].(string), 64)
			if !bounds[upper] {
				t.Errorf("%s %s: a native bucket ends at %v, no classic bound does", p.name, labels, upper)
			}
		}
		for _, q := range []string{"0.5", "0.99"} {
			n := p.queryAt(t, "histogram_quantile("+q+", dbiolat_query_duration_seconds"+labels+")", at)
			c := p.queryAt(t, "histogram_quantile("+q+", dbiolat_query_duration_seconds_bucket"+labels+")", at)
			if len(n) != 1 || len(c) != 1 {
				t.Fatalf("%s %s: p%s native %+v, classic %+v", p.name, labels, q, n, c)
			}
			nv, _ := strconv.ParseFloat(n[0].Value[1], 64)
			cv, _ := strconv.ParseFloat(c[0].Value[1], 64)
			if math.Abs(nv-cv) > 1e-9*cv {
				t.Errorf("%s %s: quantile %s native %g, classic %g", p.name, labels, q, nv, cv)
			}
			t.Logf("%s %s: %s queries in %d native buckets, quantile %s %.3g s", p.name, labels, h.Histogram.Count, len(h.Histogram.Buckets), q, nv)
		}
	}
}

// promServer is a Prometheus server the test started.
type promServer struct {
	name, addr string
	log        *strings.Builder
}

// startPrometheus runs a Prometheus with a configuration, in a temp
// directory, on a free loopback port, until the test ends.
func startPrometheus(t *testing.T, name, bin, config string) *promServer {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &promServer{name: name, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), log: &strings.Builder{}}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.addr)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return p
}

// promSample is one sample of an instant query's result: a value, or a
// native histogram.
type promSample struct {
	Metric    map[string]string
	Value     [2]string // time, value (its time is a number: read as text)
	Histogram *struct {
		Count   string
		Buckets [][4]any // boundary rule, lower, upper, count
	}
}

// query runs an instant query through the HTTP API; an error of the
// query fails the test.
func (p *promServer) query(t *testing.T, expr string) []promSample {
	t.Helper()
	return p.queryAt(t, expr, "")
}

// queryAt runs an instant query at a time (unix seconds; "": now).
func (p *promServer) queryAt(t *testing.T, expr, at string) []promSample {
	t.Helper()
	args := url.Values{"query": {expr}}
	if at != "" {
		args.Set("time", at)
	}
	resp, err := http.Get("http://" + p.addr + "/api/v1/query?" + args.Encode())
	if err != nil {
		return nil // not up yet
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric    map[string]string
				Value     [2]json.RawMessage
				Histogram [2]json.RawMessage
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("%s: %s: %v %s", p.name, expr, err, r.Error)
	}
	var out []promSample
	for _, s := range r.Data.Result {
		var ps promSample
		ps.Metric = s.Metric
		if s.Histogram[1] != nil {
			json.Unmarshal(s.Histogram[1], &ps.Histogram)
		} else {
			var v string
			json.Unmarshal(s.Value[1], &v)
			ps.Value = [2]string{string(s.Value[0]), v}
		}
		out = append(out, ps)
	}
	return out
}

// dashboardVar is a Grafana variable in a panel's expression.
var dashboardVar = regexp.MustCompile(`\$[a-z]+\b`)
