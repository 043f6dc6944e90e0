package oteltest

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// A log record and two spans (an application's request, a query as its
// child) sent with the OpenTelemetry Go SDK, logs over OTLP/HTTP and
// traces over OTLP/gRPC, come back from the Collector's files with their
// attributes and trace IDs, and from Jaeger, where the Collector
// forwarded the spans, with the child's parent and each span's kind. A
// Collector stopped and started again listens on the same ports and keeps
// what it wrote.
func TestComponentsReceiveWhatTheSDKSends(t *testing.T) {
	j := StartJaeger(t)
	c := StartCollector(t, ForwardTraces(j.OTLPGRPC))
	ctx := context.Background()
	res := resource.NewSchemaless(attribute.String("service.name", "oteltest"), attribute.String("host.name", "db-1"))

	spans, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(c.GRPC), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tracing := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithResource(res))
	defer tracing.Shutdown(ctx)
	logs, err := otlploghttp.New(ctx, otlploghttp.WithEndpointURL(c.HTTP+"/v1/logs"))
	if err != nil {
		t.Fatal(err)
	}
	logging := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(logs)), sdklog.WithResource(res))
	defer logging.Shutdown(ctx)
	emit := func(ctx context.Context, summary string) {
		var r otellog.Record
		r.SetEventName("db.server.query_sample")
		r.SetTimestamp(time.Now())
		r.SetBody(attribute.StringValue(summary))
		r.AddAttributes(attribute.String("db.query.summary", summary), attribute.Int64("dbiolat.io_wait_ns", 123456789012))
		logging.Logger("oteltest").Emit(ctx, r)
	}

	tracer := tracing.Tracer("oteltest")
	appCtx, app := tracer.Start(ctx, "GET /orders", trace.WithSpanKind(trace.SpanKindServer))
	queryCtx, query := tracer.Start(appCtx, "SELECT orders", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system.name", "postgresql"), attribute.Int64("dbiolat.io_wait_ns", 123456789012)))
	emit(queryCtx, "SELECT orders")
	query.End()
	app.End()
	traceID, appID, queryID := app.SpanContext().TraceID(), app.SpanContext().SpanID(), query.SpanContext().SpanID()

	// The Collector's files, decoded as OTLP.
	r := onlyLog(t, c.WaitLogs(t, 1))
	if r.EventName() != "db.server.query_sample" || r.Body().Str() != "SELECT orders" || r.TraceID() != [16]byte(traceID) || r.SpanID() != [8]byte(queryID) {
		t.Errorf("log record: event %q body %q trace %s span %s, want the query span's %s %s", r.EventName(), r.Body().AsString(), r.TraceID(), r.SpanID(), traceID, queryID)
	}
	if v, ok := r.Attributes().Get("dbiolat.io_wait_ns"); !ok || v.Int() != 123456789012 {
		t.Errorf("log record's dbiolat.io_wait_ns: %v", v.AsRaw())
	}
	byID := map[[8]byte]ptrace.Span{}
	got := c.WaitSpans(t, 2)
	for i := range got.ResourceSpans().Len() {
		rs := got.ResourceSpans().At(i)
		if host, _ := rs.Resource().Attributes().Get("host.name"); host.Str() != "db-1" {
			t.Errorf("spans' resource: host.name %q", host.Str())
		}
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				byID[s.SpanID()] = s
			}
		}
	}
	if s := byID[[8]byte(queryID)]; s.ParentSpanID() != [8]byte(appID) || s.Kind() != ptrace.SpanKindClient || s.TraceID() != [16]byte(traceID) {
		t.Errorf("the query span in the collector's file: parent %s kind %s, want parent %s kind Client", s.ParentSpanID(), s.Kind(), appID)
	}

	// Jaeger's query API: the same spans, with the parent relation.
	jt := j.Trace(t, traceID.String(), 2)
	jspans := map[string]JaegerSpan{}
	for _, s := range jt.Spans {
		jspans[s.SpanID] = s
	}
	ja, jq := jspans[appID.String()], jspans[queryID.String()]
	if ja.Parent() != "" || ja.Kind() != "server" || ja.OperationName != "GET /orders" {
		t.Errorf("the application span in Jaeger: %+v", ja)
	}
	if jq.Parent() != appID.String() || jq.Kind() != "client" || jq.OperationName != "SELECT orders" {
		t.Errorf("the query span in Jaeger: parent %q kind %q name %q, want parent %s, client", jq.Parent(), jq.Kind(), jq.OperationName, appID)
	}
	if v, _ := jq.Tag("dbiolat.io_wait_ns"); v != "123456789012" {
		t.Errorf("the query span's dbiolat.io_wait_ns in Jaeger: %q", v)
	}
	if p := jt.Processes[jq.ProcessID]; p.ServiceName != "oteltest" {
		t.Errorf("the query span's process in Jaeger: %+v", p)
	}
	if jq.StartTime < ja.StartTime || jq.StartTime+jq.Duration > ja.StartTime+ja.Duration {
		t.Errorf("the query span [%d, +%d] µs is not within the application's [%d, +%d]", jq.StartTime, jq.Duration, ja.StartTime, ja.Duration)
	}

	// An outage: the Collector comes back on the same ports, appending.
	c.Stop(t)
	c.Start(t)
	emit(ctx, "SELECT after restart")
	again := c.WaitLogs(t, 2)
	if n := again.LogRecordCount(); n != 2 {
		t.Errorf("%d log records after the restart, want 2", n)
	}
}

// onlyLog is the one log record of logs; the test fails if there are others.
func onlyLog(t *testing.T, logs plog.Logs) plog.LogRecord {
	t.Helper()
	if n := logs.LogRecordCount(); n != 1 {
		t.Fatalf("%d log records, want 1", n)
	}
	return logs.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
}
