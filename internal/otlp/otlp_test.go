package otlp

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/dbiolat/dbiolat/internal/container"
	"github.com/dbiolat/dbiolat/internal/model"
)

const (
	appTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	appSpan  = "00f067aa0ba902b7"
)

// aQuery is a query as the session reports it: boxes that add up to its
// time, named waits, a TCP client, a pod, the application's trace context.
func aQuery() *model.Query {
	q := &model.Query{Type: "query", TS: time.Unix(1_800_000_000, 123_456_789), PID: 4242, Instance: 4000, System: "postgresql",
		DataDir: "/var/lib/pg", Port: 5432, Role: "client backend", Database: "bench", User: "app", ClientAddr: "127.0.0.1", ClientPort: 50000,
		Fingerprint: "0123456789abcdef", Query: "SELECT abalance FROM pgbench_accounts WHERE aid = $1", QueryNs: 10_000_000, Statements: 1,
		CPUNs: 2_000_000, RunqNs: 500_000, IOWaitNs: 6_000_000, LockNs: 1_000_000,
		Waits:     map[string]uint64{"IO/DataFileRead": 6_000_000, "Lock/relation": 1_000_000},
		Container: &container.Info{Runtime: "containerd", ID: strings.Repeat("ab", 32), Namespace: "db", Pod: "pg-0", PodUID: "uid"},
		TraceID:   appTrace, ParentSpanID: appSpan, QueryID: -8_716_437_223_111_042_003}
	q.FSReadCount, q.FSReadMissCount, q.BlkCount = 3, 2, 2
	q.UnaccountedNs = q.Unaccounted()
	return q
}

// memLogs keeps the log records exported.
type memLogs struct {
	mu      sync.Mutex
	records []sdklog.Record
	fail    error
	block   chan struct{} // if set, Export waits for it to close
}

func (m *memLogs) Export(ctx context.Context, rs []sdklog.Record) error {
	if m.block != nil {
		select {
		case <-m.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	for _, r := range rs {
		m.records = append(m.records, r.Clone())
	}
	return nil
}
func (m *memLogs) Shutdown(context.Context) error   { return nil }
func (m *memLogs) ForceFlush(context.Context) error { return nil }

// exportOne exports queries at once (every one chosen) and returns what
// the collector would get.
func exportOne(t *testing.T, qs ...*model.Query) (tracetest.SpanStubs, []sdklog.Record, []model.OTLPCount) {
	t.Helper()
	spans, logs := keepSpans{tracetest.NewInMemoryExporter()}, &memLogs{}
	e := New(Config{Threshold: 0, Rate: 1e9, Host: "db1"}, spans, logs)
	for _, q := range qs {
		e.Offer(q)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return spans.GetSpans(), logs.records, e.Counts()
}

func attrMap(kvs []attribute.KeyValue) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// A query's span is a SERVER span in the application's trace, its parent
// the application's span; its children are the non-zero boxes in the
// catalog's order, laid end to end, adding up to the query's time.
func TestSpanTree(t *testing.T) {
	q := aQuery()
	spans, _, _ := exportOne(t, q)
	var server tracetest.SpanStub
	var children tracetest.SpanStubs
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindServer {
			server = s
		} else {
			children = append(children, s)
		}
	}
	if server.Name != "SELECT pgbench_accounts" || server.SpanContext.TraceID().String() != appTrace ||
		server.Parent.SpanID().String() != appSpan || !server.Parent.IsRemote() {
		t.Fatalf("server span %q trace %s parent %s: want SELECT pgbench_accounts in %s under %s",
			server.Name, server.SpanContext.TraceID(), server.Parent.SpanID(), appTrace, appSpan)
	}
	if !server.StartTime.Equal(q.TS) || server.EndTime.Sub(server.StartTime) != time.Duration(q.QueryNs) {
		t.Errorf("server span %v..%v, want %v for %v", server.StartTime, server.EndTime, q.TS, time.Duration(q.QueryNs))
	}
	var want []string
	for _, b := range model.Boxes {
		if *b.Of(q) > 0 {
			want = append(want, b.Title)
		}
	}
	slices.SortFunc(children, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	var names []string
	at := server.StartTime
	for _, c := range children {
		names = append(names, c.Name)
		if c.Parent.SpanID() != server.SpanContext.SpanID() || c.SpanContext.TraceID() != server.SpanContext.TraceID() {
			t.Errorf("box %s: not a child of the query's span", c.Name)
		}
		if !c.StartTime.Equal(at) {
			t.Errorf("box %s starts at %v, want %v (end to end)", c.Name, c.StartTime, at)
		}
		at = c.EndTime
	}
	if !slices.Equal(names, want) {
		t.Errorf("boxes %q, want %q", names, want)
	}
	if !at.Equal(server.EndTime) {
		t.Errorf("boxes end at %v, the query at %v: they do not add up", at, server.EndTime)
	}
	a := attrMap(server.Attributes)
	if a["db.query.summary"].AsString() != "SELECT pgbench_accounts" || a["dbiolat.waits.IO/DataFileRead"].AsInt64() != 6_000_000 ||
		a["dbiolat.io_wait_ns"].AsInt64() != 6_000_000 {
		t.Errorf("span attributes: %v", server.Attributes)
	}
}

// Boxes the clocks made overrun the query are cut at its end: the
// children still add up to the query's time, exactly.
func TestBoxesOverrunCut(t *testing.T) {
	q := aQuery()
	q.CPUNs += 3_000_000 // accounted 13 ms of 10
	q.UnaccountedNs = q.Unaccounted()
	spans, _, _ := exportOne(t, q)
	var sum time.Duration
	for _, s := range spans {
		if s.SpanKind != trace.SpanKindServer {
			sum += s.EndTime.Sub(s.StartTime)
		}
	}
	if sum != time.Duration(q.QueryNs) {
		t.Errorf("boxes add up to %v, the query took %v", sum, time.Duration(q.QueryNs))
	}
}

// The log record is the Collector's query sample: its event name, the
// query's start, the query span's trace and span ids, and the attributes.
func TestLogRecord(t *testing.T) {
	q := aQuery()
	spans, logs, counts := exportOne(t, q)
	if len(logs) != 1 {
		t.Fatalf("%d log records, want 1", len(logs))
	}
	r := logs[0]
	var server tracetest.SpanStub
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindServer {
			server = s
		}
	}
	if r.EventName() != QuerySample || !r.Timestamp().Equal(q.TS) || r.TraceID().String() != appTrace || r.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("log record %s at %v in %s span %s; want %s at %v in %s span %s", r.EventName(), r.Timestamp(), r.TraceID(), r.SpanID(),
			QuerySample, q.TS, appTrace, server.SpanContext.SpanID())
	}
	var kvs []attribute.KeyValue
	r.WalkAttributes(func(kv attribute.KeyValue) bool { kvs = append(kvs, kv); return true })
	a := attrMap(kvs)
	for k, want := range map[string]any{
		"db.system.name": "postgresql", "db.namespace": "bench", "db.query.text": q.Query, "db.query.summary": "SELECT pgbench_accounts",
		"user.name": "app", "server.address": "db1", "server.port": int64(5432), "process.pid": int64(4242),
		"client.address": "127.0.0.1", "client.port": int64(50000), "k8s.pod.name": "pg-0", "k8s.namespace.name": "db",
		"dbiolat.fingerprint": "0123456789abcdef", "dbiolat.query_ns": int64(10_000_000), "dbiolat.statements": int64(1),
		"dbiolat.cpu_ns": int64(2_000_000), "dbiolat.unaccounted_ns": int64(500_000), "dbiolat.fs_read_miss_count": int64(2),
		"dbiolat.waits.Lock/relation": int64(1_000_000),
		"postgresql.query_id":         "-8716437223111042003", // as pg_stat_activity.query_id::text, exact past 2^53
	} {
		if got := a[k].AsInterface(); got != want {
			t.Errorf("attribute %s = %v (%T), want %v", k, got, got, want)
		}
	}
	for _, absent := range []string{"dbiolat.failed", "dbiolat.tid", "dbiolat.shared_hit", "dbiolat.query_truncated"} {
		if _, ok := a[absent]; ok {
			t.Errorf("attribute %s sent for a zero value (optional)", absent)
		}
	}
	if !slices.Contains(counts, model.OTLPCount{Signal: "logs", Outcome: sent, Count: 1}) ||
		!slices.Contains(counts, model.OTLPCount{Signal: "traces", Outcome: sent, Count: 1}) {
		t.Errorf("counts %v: want one sent of each", counts)
	}
}

// A query without trace context starts a trace of its own, which its
// log record carries; a failed one has an error status.
func TestNoTraceContext(t *testing.T) {
	q := aQuery()
	q.TraceID, q.ParentSpanID, q.Failed, q.QueryID = "", "", 1, 0
	spans, logs, _ := exportOne(t, q)
	logs[0].WalkAttributes(func(kv attribute.KeyValue) bool {
		if kv.Key == QueryIDKey {
			t.Errorf("a query without a query id has %s %q", kv.Key, kv.Value.Emit())
		}
		return true
	})
	for _, s := range spans {
		if s.SpanKind != trace.SpanKindServer {
			continue
		}
		if s.Parent.IsValid() || s.Status.Code.String() != "Error" {
			t.Errorf("span parent %v status %v: want a root with an error", s.Parent, s.Status)
		}
		if logs[0].TraceID() != s.SpanContext.TraceID() {
			t.Errorf("log record's trace %s, the span's %s", logs[0].TraceID(), s.SpanContext.TraceID())
		}
	}
}

// Every field of a query record is exported: under a semantic
// convention's name, or dbiolat's own from the catalog, or said why not.
func TestAttributesCoverEveryField(t *testing.T) {
	notAttributes := map[string]string{
		"type": "the record's kind", "ts": "the span's start, the log record's time",
		"trace_id": "the span's trace", "parent_span_id": "the span's parent", "engine_fs": "an object: its total is in engine_ns",
	}
	q := aQuery()
	q.EngineFS = &model.FSTotals{}
	b, _ := json.Marshal(q)
	var m map[string]any
	json.Unmarshal(b, &m)
	exported := map[string]bool{}
	for _, c := range Conventions {
		exported[c.JSON] = true
	}
	for _, f := range model.Fields {
		exported[f.Name] = true
	}
	for _, b := range model.Boxes {
		exported[b.Name] = true
	}
	for k := range m {
		if !exported[k] && notAttributes[k] == "" {
			t.Errorf("query field %s is not exported: add it to model.Fields or Conventions", k)
		}
	}
}

func TestChooser(t *testing.T) {
	now := time.Unix(1000, 0)
	slow, fast := &model.Query{QueryNs: uint64(50 * time.Millisecond)}, &model.Query{QueryNs: uint64(time.Millisecond)}
	c := newChooser(50*time.Millisecond, 0, 1000)
	if c.choose(slow, now) != "" || c.choose(fast, now) != "not_sampled" {
		t.Error("threshold: the slow one chosen, the fast one not")
	}
	c = newChooser(-1, 1, 1000)
	if c.choose(fast, now) != "" {
		t.Error("sample 1: every query chosen")
	}
	// A rate of 10 a second: 10 at once, then one per 100 ms.
	c = newChooser(0, 0, 10)
	n := 0
	for range 100 {
		if c.choose(fast, now) == "" {
			n++
		}
	}
	if n != 10 || c.choose(fast, now) != "rate_limited" {
		t.Errorf("%d of 100 at once under a rate of 10, want 10 then rate_limited", n)
	}
	if c.choose(fast, now.Add(100*time.Millisecond)) != "" || c.choose(fast, now.Add(100*time.Millisecond)) != "rate_limited" {
		t.Error("100 ms later: one more")
	}
	// A sample draws about its share.
	c = newChooser(-1, 0.1, 1e9)
	n = 0
	for range 10000 {
		if c.choose(fast, now) == "" {
			n++
		}
	}
	if n < 700 || n > 1300 { // 1000 expected, sd 30: 10 sd either side
		t.Errorf("sample 0.1 drew %d of 10000", n)
	}
}

// With the collector stuck, Offer never blocks: the queue fills, what
// does not fit is counted as queue_full, and every query offered is
// accounted for once the collector answers.
func TestQueueFullCountsDrops(t *testing.T) {
	logs := &memLogs{block: make(chan struct{})}
	e := New(Config{Threshold: 0, Rate: 1e9, Queue: 16}, tracetest.NewInMemoryExporter(), logs)
	const offered = 2000
	done := make(chan struct{})
	go func() {
		for range offered {
			e.Offer(aQuery())
		}
		close(done)
	}()
	<-done // would hang if Offer waited for the stuck export
	full := countOf(e.Counts(), "logs", "queue_full")
	if full == 0 || full > offered {
		t.Errorf("queue_full %d of %d offered to a queue of 16 with the collector stuck", full, offered)
	}
	close(logs.block)
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, signal := range model.OTLPSignals {
		var total uint64
		for _, c := range e.Counts() {
			if c.Signal == signal {
				total += c.Count
			}
		}
		if total != offered {
			t.Errorf("%s: %d accounted for, %d offered", signal, total, offered)
		}
	}
	if got := uint64(len(logs.records)); got != countOf(e.Counts(), "logs", sent) {
		t.Errorf("%d log records exported, %d counted sent", got, countOf(e.Counts(), "logs", sent))
	}
}

// A collector that refuses: the records are counted export_failed, by
// signal, and Close returns.
func TestExportFailedCounted(t *testing.T) {
	logs := &memLogs{fail: errors.New("refused")}
	e := New(Config{Threshold: 0, Rate: 1e9}, tracetest.NewInMemoryExporter(), logs)
	for range 5 {
		e.Offer(aQuery())
	}
	e.Close(context.Background())
	if countOf(e.Counts(), "logs", "export_failed") != 5 || countOf(e.Counts(), "traces", sent) != 5 {
		t.Errorf("counts %v: want 5 logs export_failed, 5 traces sent", e.Counts())
	}
}

// Close gives up at its deadline: a stuck collector does not hold the
// exit, and what was not sent is counted.
func TestCloseBounded(t *testing.T) {
	logs := &memLogs{block: make(chan struct{})}
	e := New(Config{Threshold: 0, Rate: 1e9}, tracetest.NewInMemoryExporter(), logs)
	for range 3 {
		e.Offer(aQuery())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	e.Close(ctx)
	if got := countOf(e.Counts(), "logs", "export_failed"); got != 3 {
		t.Errorf("%d log records counted export_failed after Close's deadline, want 3", got)
	}
}

func countOf(cs []model.OTLPCount, signal, outcome string) uint64 {
	for _, c := range cs {
		if c.Signal == signal && c.Outcome == outcome {
			return c.Count
		}
	}
	return 0
}

// keepSpans is the SDK's in-memory exporter, but for Shutdown, which
// would forget the spans before the test reads them.
type keepSpans struct{ *tracetest.InMemoryExporter }

func (keepSpans) Shutdown(context.Context) error { return nil }

var _ sdktrace.SpanExporter = keepSpans{}
