package main

// Issue 34's promises for the OpenTelemetry export of serve at its
// defaults (every query counted in the kernel, all the time; a record
// only of those chosen): an application's slow queries each give one
// log record and one span in its trace, beside a background load that is
// counted but mostly not exported; the same on MariaDB against its
// status counters; and drops that are counted, never silent.

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/mysandbox"
	"github.com/dbiolat/dbiolat/internal/oteltest"
	"github.com/dbiolat/dbiolat/internal/otlp"
)

// The defaults the tests below rely on (cmd/dbiolat/otlp.go): a query
// of 80 ms is over the threshold; of the others, the kernel draws 1%.
const (
	tracedThreshold = 50 * time.Millisecond
	tracedSample    = 0.01
	tracedQueries   = 20
)

// appSpans are an application's spans, one per slow query it sends,
// made with the OpenTelemetry SDK and sent to Jaeger (as the
// application's own exporter would) when ended.
type appSpans struct {
	tp    *sdktrace.TracerProvider
	spans []oteltrace.Span
}

func startAppSpans(t *testing.T, j *oteltest.Jaeger, n int) *appSpans {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(j.OTLPHTTP+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	a := &appSpans{tp: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "shop"))))}
	for range n {
		_, span := a.tp.Tracer("shop").Start(context.Background(), "GET /orders", oteltrace.WithSpanKind(oteltrace.SpanKindServer))
		a.spans = append(a.spans, span)
	}
	return a
}

// traceparents are the W3C trace contexts sqlcommenter appends, one per span.
func (a *appSpans) traceparents() []string {
	var out []string
	for _, s := range a.spans {
		sc := s.SpanContext()
		out = append(out, fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID()))
	}
	return out
}

// end ends the spans and sends them.
func (a *appSpans) end(t *testing.T) {
	t.Helper()
	for _, s := range a.spans {
		s.End()
	}
	if err := a.tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// runTraced runs testdata/drivers/traced.py: the slow queries of an
// instrumented application (engine pg: psycopg with env's PG*; mysql:
// PyMySQL on socket), one every interval, or all at once ("burst").
func runTraced(t *testing.T, ctx context.Context, engine string, env []string, interval string, parents []string) *exec.Cmd {
	t.Helper()
	python, _ := driverTools(t)
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join("testdata", "drivers", "traced.py"), engine, interval}, parents...)...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// checkTracedQueries: the slow queries (their text holds marker) each
// gave exactly one db.server.query_sample log record in the Collector and
// one SERVER span, in the application's trace, the child of its span,
// and the log record names that span; Jaeger shows each span under the
// application's.
func checkTracedQueries(t *testing.T, col *oteltest.Collector, j *oteltest.Jaeger, a *appSpans, marker string) {
	t.Helper()
	apps := map[string]string{} // trace id -> the application's span id
	for _, s := range a.spans {
		apps[s.SpanContext().TraceID().String()] = s.SpanContext().SpanID().String()
	}
	logs := map[string]plog.LogRecord{}
	for _, r := range logRecords(col.Logs(t)) {
		if !strings.Contains(attr(r, "db.query.text"), marker) {
			continue
		}
		id := r.TraceID().String()
		if _, ok := apps[id]; !ok {
			t.Errorf("a log record of a slow query in trace %s, not the application's", id)
			continue
		}
		if _, dup := logs[id]; dup {
			t.Errorf("trace %s: two log records of its slow query", id)
		}
		if r.EventName() != otlp.QuerySample {
			t.Errorf("trace %s: a log record named %q", id, r.EventName())
		}
		logs[id] = r
	}
	spans := map[string]ptrace.Span{}
	traces := col.Traces(t)
	for i := range traces.ResourceSpans().Len() {
		ss := traces.ResourceSpans().At(i).ScopeSpans()
		for j := range ss.Len() {
			for k := range ss.At(j).Spans().Len() {
				s := ss.At(j).Spans().At(k)
				if v, ok := s.Attributes().Get("db.query.text"); !ok || !strings.Contains(v.AsString(), marker) || s.Kind() != ptrace.SpanKindServer {
					continue
				}
				id := s.TraceID().String()
				if _, dup := spans[id]; dup {
					t.Errorf("trace %s: two spans of its slow query", id)
				}
				spans[id] = s
				if parent, ok := apps[id]; !ok || s.ParentSpanID().String() != parent {
					t.Errorf("trace %s: the query span's parent is %s, want the application's span %s", id, s.ParentSpanID(), parent)
				}
			}
		}
	}
	t.Logf("slow queries with a traceparent: %d sent, %d log records, %d server spans in their traces", len(apps), len(logs), len(spans))
	if len(logs) != len(apps) || len(spans) != len(apps) {
		t.Errorf("%d log records and %d spans of the %d slow queries, want one each", len(logs), len(spans), len(apps))
	}
	for id, r := range logs {
		if s, ok := spans[id]; ok && r.SpanID() != s.SpanID() {
			t.Errorf("trace %s: the log record names span %s, the query's span is %s", id, r.SpanID(), s.SpanID())
		}
	}
	// Jaeger, which the Collector forwards the spans to and the
	// application sends its own: each query span under the application's.
	for id, parent := range apps {
		got := j.Trace(t, id, 2)
		n := 0
		for _, s := range got.Spans {
			if s.Kind() == "server" && got.Processes[s.ProcessID].ServiceName == "dbiolat" {
				n++
				if s.Parent() != parent {
					t.Errorf("jaeger, trace %s: dbiolat's span's parent is %q, want the application's %s", id, s.Parent(), parent)
				}
			}
		}
		if n != 1 {
			t.Errorf("jaeger, trace %s: %d server spans of dbiolat, want 1", id, n)
		}
	}
}

// otlpOffered is every query offered to the export, as serve's
// /metrics count them for the logs signal: sent, or dropped for a reason.
func otlpOffered(fams map[string]*dto.MetricFamily) float64 {
	return otlpCount(fams, "logs", "sent", "") + otlpCount(fams, "logs", "dropped", "")
}

// sampleBound is how many of n queries a sample of share p draws at
// most, but for a chance under one in a billion: the binomial's mean and
// six standard deviations, and one for the rounding.
func sampleBound(n, p float64) float64 {
	return n*p + 6*math.Sqrt(n*p*(1-p)) + 1
}

// serve at its defaults (no --duty: every query, all the time) with
// --otlp, beside a minute of paced pgbench (select-only, so no lock makes
// its queries slow): an application instrumented with sqlcommenter sends
// 20 slow queries through psycopg, one every 3 s, each in a trace of its
// own. Each gives exactly one log record and one span, in its trace,
// under the application's span, in the Collector and in Jaeger.
// pgbench's queries are counted but mostly not exported: only the
// kernel's 1% sample of them (and any a stall made slower than the
// threshold). Nothing is lost, and /metrics count what the Collector has.
func TestServeOTLPSlowQueriesInTraces(t *testing.T) {
	sideBySide(t)
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	j := oteltest.StartJaeger(t)
	col := oteltest.StartCollector(t, oteltest.ForwardTraces(j.OTLPGRPC))
	tr := startTrace(t, "serve", "--listen", "127.0.0.1:0", "--pid", strconv.Itoa(c.PostmasterPID()), "--otlp", col.HTTP)
	url := serveMetrics(t, tr)
	psql(t, c, "SELECT pg_stat_statements_reset()")

	app := startAppSpans(t, j, tracedQueries)
	load := make(chan error, 1)
	go func() {
		_, err := c.Pgbench(ctx, "postgres", "-n", "-S", "-c", "2", "-R", "200", "-T", "62")
		load <- err
	}()
	tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := cmdrun.Run(runTraced(t, tctx, "pg", c.Env(), "3", app.traceparents()), nil, "psycopg"); err != nil {
		t.Fatal(err)
	}
	app.end(t)
	if err := <-load; err != nil {
		t.Fatal(err)
	}
	calls := func(prefix string) float64 {
		n, err := strconv.ParseFloat(psql(t, c, fmt.Sprintf("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE '%s%%'", prefix)), 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	background, slow := calls("SELECT abalance"), calls("SELECT pg_sleep")
	// The export settles: every query offered has been sent (the Collector
	// has as many log records as /metrics count sent).
	var fams map[string]*dto.MetricFamily
	waitFor(t, "the export to settle", func() bool {
		fams = scrape(t, url)
		return float64(col.Logs(t).LogRecordCount()) == otlpCount(fams, "logs", "sent", "") &&
			float64(col.Traces(t).SpanCount()) >= otlpCount(fams, "traces", "sent", "")
	})
	if slow != tracedQueries {
		t.Errorf("pg_stat_statements counted %.0f slow queries, the application sent %d", slow, tracedQueries)
	}
	checkTracedQueries(t, col, j, app, "pg_sleep")

	// pgbench's queries: those under the threshold that were exported
	// were drawn by the kernel's sample, 1% of them; those over it, a
	// stall's, are logged.
	drawn, over := 0.0, 0.0
	for _, r := range logRecords(col.Logs(t)) {
		if !strings.HasPrefix(attr(r, "db.query.text"), "SELECT abalance") {
			continue
		}
		ns, err := strconv.ParseFloat(attr(r, "dbiolat.query_ns"), 64)
		if err != nil {
			t.Fatalf("a log record's dbiolat.query_ns: %v", err)
		}
		if time.Duration(ns) >= tracedThreshold {
			over++
		} else {
			drawn++
		}
	}
	mean, bound := background*tracedSample, sampleBound(background, tracedSample)
	t.Logf("pgbench: %.0f queries, %.0f exported as drawn (expected %.1f, at most %.0f), %.0f over the threshold", background, drawn, mean, bound, over)
	// The rate (100 a second, a second's worth in the bucket) is far above
	// what the sample and the slow queries offer (about 2 and 0.3 a
	// second): it drops none.
	if drawn > bound || drawn < 2*mean-bound {
		t.Errorf("%.0f of pgbench's %.0f queries exported as drawn for a sample of %g: want %.1f, within [%.0f, %.0f]",
			drawn, background, tracedSample, mean, max(0, 2*mean-bound), bound)
	}
	if over > 0.01*background {
		t.Errorf("%.0f of pgbench's %.0f select-only queries took over %v: the machine stalled, or the threshold is not applied", over, background, tracedThreshold)
	}
	checkNothingLost(t, fams)
	if n := otlpCount(fams, "logs", "dropped", "rate_limited"); n != 0 {
		t.Errorf("%.0f records over --otlp-rate, at about 2 a second", n)
	}
	// Every query chosen was sent, and is a log record and a span; those
	// not chosen (the kernel's, counted a tick late) are not_sampled.
	sent := otlpCount(fams, "logs", "sent", "")
	if off := otlpOffered(fams) - otlpCount(fams, "logs", "dropped", "not_sampled"); off != sent || otlpCount(fams, "traces", "sent", "") != sent {
		t.Errorf("/metrics: %.0f chosen, %.0f log records and %.0f query spans sent", off, sent, otlpCount(fams, "traces", "sent", ""))
	}
	waitFor(t, "every query to be accounted for by the export", func() bool {
		f := scrape(t, url)
		return otlpOffered(f) == f["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
	})
	if r := fams["dbiolat_traced_ratio"].GetMetric()[0].GetGauge().GetValue(); r != 1 {
		t.Errorf("dbiolat_traced_ratio %v, want 1: serve's default traces all the time", r)
	}
	checkNoLoss(t, fams)
	checkExitCounts(t, tr, sent)
}

var exitCountsRe = regexp.MustCompile(`otlp: logs (\d+) sent.*; traces (\d+) sent`)

// checkExitCounts stops serve and reads what it says on stderr became of
// its records: at least sent of each signal sent (the export's counts
// at the last scrape; a query of the test's own may have been drawn
// since), and none lost.
func checkExitCounts(t *testing.T, tr *trace, sent float64) {
	t.Helper()
	tr.stopText(t)
	line := lastLineOf(tr.stderr.String(), "otlp:")
	t.Logf("serve at exit: %s", line)
	m := exitCountsRe.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serve did not say what became of its records at exit: %s", tr.stderr.String())
	}
	for _, n := range m[1:] {
		if v, _ := strconv.ParseFloat(n, 64); v < sent {
			t.Errorf("serve says at exit %s; /metrics counted %.0f sent before", line, sent)
		}
	}
	if strings.Contains(line, "LOST") {
		t.Errorf("serve lost records: %s", line)
	}
}

// lastLineOf is the last line of out that starts with prefix.
func lastLineOf(out, prefix string) string {
	last := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) {
			last = line
		}
	}
	return last
}

// statusCounters reads MariaDB's Questions and Com_* counters at once
// (SHOW GLOBAL STATUS, which counts itself in Questions and
// Com_show_status before it reads them).
func statusCounters(t *testing.T, s *mysandbox.Server) map[string]float64 {
	t.Helper()
	out, err := s.SQL(mysqlContext(t), "", "SHOW GLOBAL STATUS WHERE Variable_name LIKE 'Com\\_%' OR Variable_name = 'Questions'")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		if name, v, ok := strings.Cut(line, "\t"); ok {
			m[strings.ToLower(name)], _ = strconv.ParseFloat(v, 64)
		}
	}
	return m
}

// fingerprintCalls adds up dbiolat_fingerprint_calls_total, "other"
// included.
func fingerprintCalls(fams map[string]*dto.MetricFamily) float64 {
	var n float64
	for _, m := range fams["dbiolat_fingerprint_calls_total"].GetMetric() {
		n += m.GetCounter().GetValue()
	}
	return n
}

// The same on MariaDB: serve at its defaults with --otlp beside half a
// minute of a paced OLTP load from PyMySQL (two connections), while an
// application sends 20 slow queries with a traceparent through PyMySQL.
// dbiolat_queries_total is the server's Questions, and the sum of the
// Com_* counters of what ran, exactly; the fingerprint series add up to
// it; every query is accounted for by the export (sent, or not chosen)
// and only the slow ones and the kernel's 1% sample were sent; each slow query is one log record and one span in
// its trace; nothing is lost.
func TestServeOTLPMariaDBEveryQuery(t *testing.T) {
	sideBySide(t)
	s := startMariaDB(t, nil)
	ctx := mysqlContext(t)
	python, _ := driverTools(t)
	if _, err := s.SQL(ctx, "", "CREATE DATABASE IF NOT EXISTS test; USE test; "+
		"CREATE TABLE load_acct (id int PRIMARY KEY, n int NOT NULL); INSERT INTO load_acct SELECT seq, 0 FROM seq_0_to_999; "+
		"CREATE TABLE load_hist (id bigint AUTO_INCREMENT PRIMARY KEY, acct int NOT NULL, at datetime(6) NOT NULL, KEY (acct, at))"); err != nil {
		t.Fatal(err)
	}
	j := oteltest.StartJaeger(t)
	col := oteltest.StartCollector(t, oteltest.ForwardTraces(j.OTLPGRPC))
	tr := startTrace(t, "serve", "--listen", "127.0.0.1:0", "--pid", strconv.Itoa(s.PID()), "--otlp", col.HTTP)
	url := serveMetrics(t, tr)

	fams0 := scrape(t, url)
	before := statusCounters(t, s)
	app := startAppSpans(t, j, tracedQueries)
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	load := make(chan error, 1)
	go func() {
		_, err := cmdrun.Run(exec.CommandContext(lctx, python, filepath.Join("testdata", "drivers", "my_load.py"), s.Socket, "2", "20", "30"), nil, "pymysql load")
		load <- err
	}()
	if _, err := cmdrun.Run(runTraced(t, lctx, "mysql", []string{"DBIOLAT_MYSQL_SOCKET=" + s.Socket}, "1.5", app.traceparents()), nil, "pymysql traced"); err != nil {
		t.Fatal(err)
	}
	app.end(t)
	if err := <-load; err != nil {
		t.Fatal(err)
	}
	after := statusCounters(t, s)
	time.Sleep(2500 * time.Millisecond) // a second's tick: the exporter has what ran
	var fams1 map[string]*dto.MetricFamily
	waitFor(t, "the export to settle", func() bool {
		fams1 = scrape(t, url)
		return float64(col.Logs(t).LogRecordCount()) == otlpCount(fams1, "logs", "sent", "")
	})

	// The server counts each statement in a Com_* counter: the load's,
	// the slow queries', PyMySQL's SET NAMES utf8mb4 at each connect
	// (Com_set_option), and the second SHOW GLOBAL STATUS (the first
	// counted itself before it read). dbiolat, since its first scrape,
	// counted both reads: one more. Questions counts the COM_QUIT of each
	// connection closed too, which runs no statement (no Com_* counts it,
	// nor does dbiolat): the three PyMySQL connections' and the first
	// read's client's.
	queries := func(f map[string]*dto.MetricFamily) float64 {
		return f["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
	}
	const quits = 3 + 1
	ours := queries(fams1) - queries(fams0)
	questions, coms := after["questions"]-before["questions"], 0.0
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if d := after[k] - before[k]; strings.HasPrefix(k, "com_") && d != 0 {
			t.Logf("%-16s +%.0f", k, d)
			coms += d
		}
	}
	t.Logf("dbiolat_queries_total +%.0f, Com_* +%.0f, Questions +%.0f", ours, coms, questions)
	if ours != coms+1 || questions != coms+quits {
		t.Errorf("dbiolat counted %.0f queries, want the server's Com_* %.0f and 1 (the first read); Questions %.0f, want Com_* and %d COM_QUIT",
			ours, coms, questions, quits)
	}
	if fp := fingerprintCalls(fams1) - fingerprintCalls(fams0); fp != ours {
		t.Errorf("the fingerprints' series add up to %.0f queries, dbiolat_queries_total to %.0f", fp, ours)
	}
	// Every query is accounted for by the export (those the kernel did not
	// choose a tick late); the load's are sent only when the kernel drew
	// them (or a stall made one slow).
	var offered float64
	waitFor(t, "every query to be accounted for by the export", func() bool {
		offered = otlpOffered(scrape(t, url)) - otlpOffered(fams0)
		return offered == ours
	})
	sent := otlpCount(fams1, "logs", "sent", "") - otlpCount(fams0, "logs", "sent", "")
	background := ours - tracedQueries
	t.Logf("offered %.0f, sent %.0f (the %d slow ones, and of %.0f others %.0f expected drawn, at most %.0f), not sampled %.0f",
		offered, sent, tracedQueries, background, background*tracedSample, sampleBound(background, tracedSample),
		otlpCount(fams1, "logs", "dropped", "not_sampled")-otlpCount(fams0, "logs", "dropped", "not_sampled"))
	// Those over the threshold (a lock wait, a stall) add to the draws:
	// the bound above, not below.
	if mean, bound := background*tracedSample, sampleBound(background, tracedSample); sent-tracedQueries > bound || sent-tracedQueries < 2*mean-bound {
		t.Errorf("%.0f of the load's %.0f queries sent, for a sample of %g: want %.1f, within [%.0f, %.0f]",
			sent-tracedQueries, background, tracedSample, mean, max(0, 2*mean-bound), bound)
	}
	checkTracedQueries(t, col, j, app, "SLEEP")
	checkNothingLost(t, fams1)
	checkNoLoss(t, fams1)
	if n := fams1["dbiolat_drops_total"]; n != nil {
		for _, m := range n.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				t.Logf("drops %s (loss %s): %.0f", labelOf(m, "kind"), labelOf(m, "loss"), v)
			}
		}
	}
	checkExitCounts(t, tr, otlpCount(fams1, "logs", "sent", ""))
}

// Nothing silent: at --otlp-rate 1, 20 slow queries ending at once
// (psycopg, twenty connections released together) are more than the
// rate lets through. The records not sent are counted as rate_limited
// on /metrics and at exit, the Collector has exactly those counted
// sent, and every query is still counted in dbiolat_queries_total, as
// pg_stat_statements counts them.
func TestServeOTLPDropsCounted(t *testing.T) {
	sideBySide(t)
	c := startPG(t, nil)
	col := oteltest.StartCollector(t)
	// --otlp-sample 0: the only records offered are the slow queries'.
	tr := startTrace(t, "serve", "--listen", "127.0.0.1:0", "--pid", strconv.Itoa(c.PostmasterPID()), "--otlp", col.HTTP,
		"--otlp-rate", "1", "--otlp-sample", "0")
	url := serveMetrics(t, tr)
	queries := func(f map[string]*dto.MetricFamily) float64 {
		return f["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
	}
	// The test's reads of pg_stat_statements fall outside the scrapes:
	// between them only the slow queries run, and are offered.
	_, theirs0 := statementCalls(t, c)
	time.Sleep(2500 * time.Millisecond) // a second's tick: the read is counted before the first scrape
	fams0 := scrape(t, url)
	var parents []string
	for i := range tracedQueries {
		parents = append(parents, fmt.Sprintf("00-%032x-%016x-01", 0x5100+i, 0x5200+i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	if _, err := cmdrun.Run(runTraced(t, ctx, "pg", c.Env(), "burst", parents), nil, "psycopg"); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	time.Sleep(2500 * time.Millisecond) // a second's tick: the exporter has what ran
	var fams map[string]*dto.MetricFamily
	waitFor(t, "the export to settle", func() bool {
		fams = scrape(t, url)
		return float64(col.Logs(t).LogRecordCount()) == otlpCount(fams, "logs", "sent", "")
	})
	_, theirs1 := statementCalls(t, c)

	slowSent := 0.0
	for _, r := range logRecords(col.Logs(t)) {
		if strings.Contains(attr(r, "db.query.text"), "pg_sleep") {
			slowSent++
		}
	}
	for _, signal := range []string{"logs", "traces"} {
		sent, limited := otlpCount(fams, signal, "sent", "")-otlpCount(fams0, signal, "sent", ""),
			otlpCount(fams, signal, "dropped", "rate_limited")-otlpCount(fams0, signal, "dropped", "rate_limited")
		// Not sampled: the test's own queries between the scrapes, under
		// the threshold (counted in the kernel, a tick late).
		notSampled := otlpCount(fams, signal, "dropped", "not_sampled") - otlpCount(fams0, signal, "dropped", "not_sampled")
		other := otlpCount(fams, signal, "dropped", "") - otlpCount(fams0, signal, "dropped", "") - limited - notSampled
		t.Logf("%s: %.0f sent, %.0f rate_limited, %.0f not sampled, %.0f dropped otherwise", signal, sent, limited, notSampled, other)
		// Each slow query offered once: sent or rate_limited. The bucket
		// holds one token and gains one a second: over the burst's
		// lifetime (took, from the driver's start to its end) at most
		// 1 + took's seconds go.
		if sent+limited != tracedQueries || other != 0 {
			t.Errorf("%s: of %d slow queries %.0f sent, %.0f rate_limited, %.0f dropped otherwise", signal, tracedQueries, sent, limited, other)
		}
		if sent < 1 || sent > 1+math.Floor(took.Seconds()) {
			t.Errorf("%s: %.0f sent at --otlp-rate 1 in a burst of %v: want 1 to %.0f", signal, sent, took, 1+math.Floor(took.Seconds()))
		}
	}
	if sent := otlpCount(fams, "logs", "sent", ""); slowSent != sent {
		t.Errorf("the Collector has %.0f slow queries' log records, /metrics count %.0f sent", slowSent, sent)
	}
	// Every query counted, exported or not: pg_stat_statements' calls
	// between the reads (each leaves itself out), dbiolat's between the
	// scrapes.
	ours, theirs := queries(fams)-queries(fams0), theirs1-theirs0
	t.Logf("dbiolat_queries_total +%.0f, pg_stat_statements +%.0f", ours, theirs)
	if ours != theirs || theirs < tracedQueries {
		t.Errorf("serve counted %.0f queries, pg_stat_statements %.0f (%d slow)", ours, theirs, tracedQueries)
	}
	checkNothingLost(t, fams)
	tr.stopText(t)
	line := lastLineOf(tr.stderr.String(), "otlp:")
	t.Logf("serve at exit: %s", line)
	if !strings.Contains(line, "not sent (over --otlp-rate)") {
		t.Errorf("serve's last words do not count the records over --otlp-rate: %q; its stderr:\n%s", line, tr.stderr.String())
	}
}
