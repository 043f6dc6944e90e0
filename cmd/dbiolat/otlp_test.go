package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/dbiolat/dbiolat/internal/mysandbox"
	"github.com/dbiolat/dbiolat/internal/oteltest"
	"github.com/dbiolat/dbiolat/internal/otlp"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/jackc/pgx/v5"
)

// serveEveryQuery starts serve on the server of pid sending every query
// the trace sees to a collector: no duty cycle, no threshold to pass, no
// sample, no rate to speak of.
func serveEveryQuery(t *testing.T, pid int, collector string) *trace {
	t.Helper()
	return startTrace(t, "serve", "--listen", "127.0.0.1:0", "--otlp", collector, "--pid", strconv.Itoa(pid),
		"--duty", "off", "--otlp-threshold", "0", "--otlp-sample", "1", "--otlp-rate", "1e6")
}

// logRecords are a collector's log records, flat.
func logRecords(logs plog.Logs) []plog.LogRecord {
	var out []plog.LogRecord
	for i := range logs.ResourceLogs().Len() {
		sl := logs.ResourceLogs().At(i).ScopeLogs()
		for j := range sl.Len() {
			for k := range sl.At(j).LogRecords().Len() {
				out = append(out, sl.At(j).LogRecords().At(k))
			}
		}
	}
	return out
}

// attr is a log record's attribute as text ("" if absent).
func attr(r plog.LogRecord, key string) string {
	v, ok := r.Attributes().Get(key)
	if !ok {
		return ""
	}
	return v.AsString()
}

// otlpCount is serve's dbiolat_otlp_records_total for a signal and
// outcome, summed over reasons ("" for every reason).
func otlpCount(fams map[string]*dto.MetricFamily, signal, outcome, reason string) float64 {
	var n float64
	for _, m := range fams["dbiolat_otlp_records_total"].GetMetric() {
		if labelOf(m, "signal") == signal && labelOf(m, "outcome") == outcome && (reason == "" || labelOf(m, "reason") == reason) {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

// checkNothingLost: with the collector up, serve's /metrics count no
// record lost, of either signal.
func checkNothingLost(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	for _, signal := range []string{"logs", "traces"} {
		lost := otlpCount(fams, signal, "dropped", "queue_full") + otlpCount(fams, signal, "dropped", "export_failed")
		t.Logf("%s: %.0f sent, %.0f lost", signal, otlpCount(fams, signal, "sent", ""), lost)
		if lost != 0 {
			t.Errorf("%.0f %s records lost with the collector up", lost, signal)
		}
	}
}

// serveMetrics is the URL of a serve's /metrics, from its stderr.
func serveMetrics(t *testing.T, tr *trace) string {
	t.Helper()
	m := servingRe.FindStringSubmatch(tr.stderr.String())
	if m == nil {
		t.Fatalf("serve does not say where its metrics are: %s", tr.stderr.String())
	}
	return m[1]
}

// serve --otlp sends one db.server.query_sample log record per statement
// pgbench ran, as pg_stat_statements counts them by statement, each with
// the semantic conventions' attributes and dbiolat's, and the statement's
// query id as pg_stat_statements has it; none is dropped.
func TestOTLPRecordsEqualPgStatStatements(t *testing.T) {
	sideBySide(t)
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	col := oteltest.StartCollector(t)
	psql(t, c, "SELECT pg_stat_statements_reset()")
	tr := serveEveryQuery(t, c.PostmasterPID(), col.HTTP)
	// -R: a pace the export keeps up with on a busy machine, so that
	// the queue never fills (the outage test makes it fill).
	if _, err := c.Pgbench(ctx, "postgres", "-n", "-c", "2", "-t", "200", "-R", "200"); err != nil {
		t.Fatal(err)
	}
	kinds := []string{"UPDATE pgbench_accounts", "UPDATE pgbench_tellers", "UPDATE pgbench_branches", "SELECT abalance", "INSERT INTO pgbench_history", "BEGIN", "END"}
	want, ids := map[string]int{}, map[string]string{}
	total := 0
	for _, k := range kinds {
		n, err := strconv.Atoi(psql(t, c, fmt.Sprintf("SELECT coalesce(sum(calls),0) FROM pg_stat_statements WHERE query LIKE '%s%%'", k)))
		if err != nil {
			t.Fatal(err)
		}
		want[k], total = n, total+n
		// pgbench's statements go one per simple Query: each has its id.
		ids[k] = psql(t, c, fmt.Sprintf("SELECT string_agg(queryid::text, ',') FROM pg_stat_statements WHERE query LIKE '%s%%'", k))
	}
	records := logRecords(col.WaitLogs(t, total))
	got := map[string]int{}
	for _, r := range records {
		text := attr(r, "db.query.text")
		for _, k := range kinds {
			if strings.HasPrefix(text, k) {
				got[k]++
				if r.EventName() != otlp.QuerySample || attr(r, "db.system.name") != "postgresql" || attr(r, "db.namespace") != "postgres" ||
					attr(r, "server.port") != fmt.Sprint(c.Port()) || attr(r, "dbiolat.fingerprint") == "" || attr(r, "dbiolat.role") != "client backend" ||
					attr(r, "db.query.summary") == "" || attr(r, "dbiolat.query_ns") == "" || r.TraceID().IsEmpty() || r.SpanID().IsEmpty() {
					t.Errorf("a log record lacks what a query sample has: %s %v", r.EventName(), r.Attributes().AsRaw())
				}
				if id := attr(r, otlp.QueryIDKey); id != ids[k] {
					t.Errorf("%s: a log record's %s is %q, pg_stat_statements' queryid %q", k, otlp.QueryIDKey, id, ids[k])
				}
				if literalDigit.MatchString(text) {
					t.Errorf("a literal left in db.query.text %q", text)
				}
			}
		}
	}
	for _, k := range kinds {
		t.Logf("%-28s log records %d, pg_stat_statements %d", k, got[k], want[k])
		if got[k] != want[k] {
			t.Errorf("%s: %d log records, pg_stat_statements counted %d", k, got[k], want[k])
		}
	}
	fams := scrape(t, serveMetrics(t, tr))
	checkNothingLost(t, fams)
	if sent := otlpCount(fams, "logs", "sent", ""); sent < float64(total) {
		t.Errorf("/metrics counts %.0f log records sent, the collector has %d of pgbench's", sent, total)
	}
	tr.stopText(t)
}

// The same for MariaDB: one log record per statement sysbench ran, as
// the server's Com_* counters count them by kind.
func TestOTLPRecordsEqualComCounters(t *testing.T) {
	sideBySide(t)
	s := startMariaDB(t, nil)
	ctx := mysqlContext(t)
	o := mysandbox.SysbenchOptions{Test: "oltp_read_write", Tables: 2, TableSize: 2000, Threads: 4, Events: 200, PSMode: "disable"}
	if _, err := s.Sysbench(ctx, o, "prepare"); err != nil {
		t.Fatal(err)
	}
	col := oteltest.StartCollector(t)
	before := comCounters(t, s)
	tr := serveEveryQuery(t, s.PID(), col.HTTP)
	// sysbench has no pace to set: it runs in steps of 20 transactions
	// (about 400 statements, less than the export's queue holds), each
	// once the collector has the last one's records, so none is dropped
	// for a full queue (the outage test makes it fill).
	var after map[string]uint64
	var records []plog.LogRecord
	for range 10 {
		if _, err := s.Sysbench(ctx, mysandbox.SysbenchOptions{Test: o.Test, Tables: o.Tables, TableSize: o.TableSize, Threads: 2, Events: 20, PSMode: o.PSMode}, "run"); err != nil {
			t.Fatal(err)
		}
		after = comCounters(t, s)
		total := uint64(0)
		for _, counter := range sysbenchKinds {
			total += after[counter] - before[counter]
		}
		records = logRecords(col.WaitLogs(t, int(total)))
	}
	got := map[string]uint64{}
	for _, r := range records {
		kind, _, _ := strings.Cut(attr(r, "db.query.text"), " ")
		if counter, ok := sysbenchKinds[kind]; ok {
			got[counter]++
			if attr(r, "db.system.name") != "mariadb" || attr(r, "db.namespace") != "sbtest" || attr(r, "user.name") != "root" ||
				attr(r, "dbiolat.connection_id") == "" || attr(r, "dbiolat.fingerprint") == "" {
				t.Errorf("a log record lacks what a query sample has: %v", r.Attributes().AsRaw())
			}
		}
	}
	for kind, counter := range sysbenchKinds {
		want := after[counter] - before[counter]
		t.Logf("%-7s log records %d, %s %d", kind, got[counter], counter, want)
		if got[counter] != want {
			t.Errorf("%s: %d log records, the server counted %d", counter, got[counter], want)
		}
	}
	checkNothingLost(t, scrape(t, serveMetrics(t, tr)))
	tr.stopText(t)
}

// An application's span, made with the OpenTelemetry SDK and sent to
// Jaeger, sends its query over the real server with a sqlcommenter
// traceparent: in Jaeger, dbiolat's span for that query is its child,
// and the query span's children, the waterfall's boxes, add up to its
// time (to Jaeger's microseconds, one per box).
func TestOTLPSpanInApplicationTrace(t *testing.T) {
	sideBySide(t)
	c := startPG(t, nil)
	j := oteltest.StartJaeger(t)
	col := oteltest.StartCollector(t, oteltest.ForwardTraces(j.OTLPGRPC))
	tr := serveEveryQuery(t, c.PostmasterPID(), col.HTTP)

	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(j.OTLPHTTP+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	app := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "shop"))))
	ctx, span := app.Tracer("shop").Start(ctx, "GET /orders", oteltrace.WithSpanKind(oteltrace.SpanKindServer))
	sc := span.SpanContext()
	traceparent := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
	// The application's driver (pgx, as a Go service talks: the extended
	// protocol, its statement prepared) sends what sqlcommenter appends;
	// the sleep makes the query long enough for boxes of some microseconds.
	conn, err := pgx.Connect(ctx, connString(c))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_sleep(0.05), count(*) FROM pg_class /*controller='orders',framework='net%2Fhttp',traceparent='"+traceparent+"'*/"); err != nil {
		t.Fatal(err)
	}
	span.End()
	if err := app.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// The application's span, dbiolat's query span and at least two boxes
	// (on CPU, the sleep's other wait).
	got := j.Trace(t, sc.TraceID().String(), 4)
	var query *oteltest.JaegerSpan
	for i, s := range got.Spans {
		if s.Kind() == "server" && got.Processes[s.ProcessID].ServiceName == "dbiolat" {
			query = &got.Spans[i]
		}
	}
	if query == nil {
		t.Fatalf("no dbiolat server span in the application's trace: %+v", got.Spans)
	}
	if query.Parent() != sc.SpanID().String() {
		t.Errorf("dbiolat's span's parent is %q, want the application's span %s", query.Parent(), sc.SpanID())
	}
	if query.OperationName != "SELECT pg_class" {
		t.Errorf("dbiolat's span is named %q, want its db.query.summary", query.OperationName)
	}
	var sum int64
	boxes := 0
	end := query.StartTime
	for _, s := range got.Spans {
		if s.Parent() != query.SpanID {
			continue
		}
		boxes++
		sum += s.Duration
		end = max(end, s.StartTime+s.Duration)
		t.Logf("box %-16s %6d µs", s.OperationName, s.Duration)
	}
	t.Logf("query span %d µs, its %d boxes %d µs", query.Duration, boxes, sum)
	if boxes < 2 || sum < query.Duration-int64(boxes) || sum > query.Duration+int64(boxes) {
		t.Errorf("the boxes add up to %d µs in %d spans, the query took %d µs", sum, boxes, query.Duration)
	}
	tr.stopText(t)
}

// The collector stopped for 10 s under load: serve keeps tracing (its
// query counter moves), its memory stays bounded, the records it could
// not send are counted on /metrics, and the export resumes once the
// collector is back.
func TestOTLPCollectorOutage(t *testing.T) {
	sideBySide(t)
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	col := oteltest.StartCollector(t)
	tr := serveEveryQuery(t, c.PostmasterPID(), col.HTTP)
	url := serveMetrics(t, tr)
	load := make(chan error, 1)
	go func() { // select-only, as fast as it goes: more records than the queue holds in the outage
		_, err := c.Pgbench(ctx, "postgres", "-n", "-S", "-c", "2", "-T", "30")
		load <- err
	}()
	waitFor(t, "the export's first records", func() bool { return col.Logs(t).LogRecordCount() > 0 })
	rssBefore := rss(t, tr.cmd.Process.Pid)
	down := scrape(t, url)
	col.Stop(t)
	time.Sleep(10 * time.Second)
	during := scrape(t, url)
	rssDuring := rss(t, tr.cmd.Process.Pid)
	queries := func(f map[string]*dto.MetricFamily) float64 {
		return f["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue()
	}
	lost := func(f map[string]*dto.MetricFamily) float64 {
		return otlpCount(f, "logs", "dropped", "queue_full") + otlpCount(f, "logs", "dropped", "export_failed")
	}
	t.Logf("in the outage: queries %.0f -> %.0f, log records lost %.0f -> %.0f, RSS %d -> %d MiB",
		queries(down), queries(during), lost(down), lost(during), rssBefore>>20, rssDuring>>20)
	if queries(during) <= queries(down) {
		t.Errorf("serve stopped counting queries while the collector was down")
	}
	if lost(during) <= lost(down) {
		t.Errorf("no record counted lost while the collector was down")
	}
	// The queue holds 2048 queries (a few KiB each with their text) and an
	// export one batch of 512 of them as spans and log records: tens of
	// MiB at most. 256 MiB over what it used before the outage leaves room
	// for the Go runtime's own swings, and fails on a queue that grows.
	if rssDuring > rssBefore+256<<20 {
		t.Errorf("serve's memory grew from %d to %d MiB in the outage", rssBefore>>20, rssDuring>>20)
	}
	had := col.Logs(t).LogRecordCount()
	sentBefore := otlpCount(during, "logs", "sent", "")
	col.Start(t)
	waitFor(t, "the export to resume", func() bool {
		return col.Logs(t).LogRecordCount() > had && otlpCount(scrape(t, url), "logs", "sent", "") > sentBefore
	})
	if err := <-load; err != nil {
		t.Fatal(err)
	}
	tr.stopText(t)
}

// rss is a process's resident memory, from /proc.
func rss(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// connString is a Go driver's way to a sandbox's server: its unix socket,
// as its superuser.
func connString(c *pgsandbox.Cluster) string {
	kv := map[string]string{}
	for _, e := range c.Env() {
		k, v, _ := strings.Cut(e, "=")
		kv[k] = v
	}
	return fmt.Sprintf("host=%s port=%s user=%s dbname=postgres", kv["PGHOST"], kv["PGPORT"], kv["PGUSER"])
}
