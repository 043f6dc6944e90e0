package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
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

// A real Prometheus (Debian's) scrapes serve while pgbench and a cold scan
// run, and every panel's expression in the Grafana dashboard returns data
// through its HTTP API.
func TestDashboardQueriesReturnData(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil && os.Getenv("CI") != "true" {
		t.Skip("Prometheus is not installed (scripts/install-deps installs it)")
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
	tr := startTrace(t, "serve", "--duty", "off", "--listen", "127.0.0.1:0", "--window", "1s", "--pid", fmt.Sprint(c.PostmasterPID()))
	target := strings.TrimSuffix(strings.TrimPrefix(servingRe.FindStringSubmatch(tr.stderr.String())[1], "http://"), "/metrics")

	dir := t.TempDir()
	config := fmt.Sprintf("global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: dbiolat\n    static_configs: [{targets: [%q]}]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	var promLog strings.Builder
	cmd.Stdout, cmd.Stderr = &promLog, &promLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

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
	// Prometheus has scraped serve enough for rates over a minute.
	waitFor(t, "Prometheus to scrape serve", func() bool {
		r := promQuery(t, addr, `count_over_time(dbiolat_queries_total[1m])`)
		if len(r) == 0 {
			return false
		}
		n, _ := strconv.ParseFloat(r[0].Value[1], 64)
		return n >= 5
	})
	time.Sleep(3 * time.Second) // the cold scan's interval scraped too
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			expr := dashboardVar.ReplaceAllString(target.Expr, ".*") // the variables ($job, $server) at "All"
			// The kernel first counts our programs' run time 30 s in
			// (session.sampleAt): until then the ratio is absent, not 0.
			if r := promQuery(t, addr, expr); len(r) == 0 && expr != "dbiolat_bpf_cpu_ratio" {
				t.Errorf("panel %q: %s returns no data", p.Title, expr)
			}
		}
	}
	if t.Failed() {
		t.Logf("Prometheus's log:\n%s", promLog.String())
	}
	tr.stopText(t)
}

// promSample is one sample of an instant query's result.
type promSample struct {
	Metric map[string]string
	Value  [2]string // time, value (its time is a number: read as text)
}

// promQuery runs an instant query through Prometheus's HTTP API; an error
// of the query fails the test.
func promQuery(t *testing.T, addr, expr string) []promSample {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil // not up yet
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]json.RawMessage
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("Prometheus: %s: %v %s", expr, err, r.Error)
	}
	var out []promSample
	for _, s := range r.Data.Result {
		var v string
		json.Unmarshal(s.Value[1], &v)
		out = append(out, promSample{Metric: s.Metric, Value: [2]string{string(s.Value[0]), v}})
	}
	return out
}

// freeAddr is a loopback address with a port nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// dashboardVar is a Grafana variable in a panel's expression.
var dashboardVar = regexp.MustCompile(`\$[a-z]+\b`)
