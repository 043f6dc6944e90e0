package otlp

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/dbiolat/dbiolat/internal/model"
)

// QuerySample is the log record's event name: the OpenTelemetry
// Collector's PostgreSQL receiver names its per-query samples so.
const QuerySample = "db.server.query_sample"

// record makes a query's span tree and log record (the providers'
// processors collect them). The span is the query's, kind SERVER, from
// its start to its end, a child of the application's span when the query
// carried its trace context; its children are the waterfall's boxes laid
// end to end, in the catalog's order, so they add up to the query's time.
// The log record carries the same attributes and the span's trace and
// span ids.
func record(tracer trace.Tracer, logger otellog.Logger, q *model.Query, host string, now time.Time) {
	attrs := Attributes(q, host)
	ctx := context.Background()
	if sc, ok := parentOf(q); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	start := q.TS
	end := start.Add(time.Duration(q.QueryNs))
	ctx, span := tracer.Start(ctx, summary(q), trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	if q.Failed > 0 {
		span.SetStatus(codes.Error, fmt.Sprintf("%d of %d statements failed", q.Failed, q.Statements))
	}
	at := start
	for _, b := range model.Boxes {
		// A box the clocks made overrun the query's end (the kernel's
		// boxes and its time are read on different paths) is cut there.
		next := at.Add(time.Duration(*b.Of(q)))
		if next.After(end) {
			next = end
		}
		if !next.After(at) {
			continue
		}
		_, child := tracer.Start(ctx, b.Title, trace.WithTimestamp(at),
			trace.WithAttributes(attribute.Int64(model.OTLPName(b.Name), next.Sub(at).Nanoseconds())))
		child.End(trace.WithTimestamp(next))
		at = next
	}
	var r otellog.Record
	r.SetEventName(QuerySample)
	r.SetTimestamp(start)
	r.SetObservedTimestamp(now)
	r.AddAttributes(attrs...)
	logger.Emit(ctx, r) // ctx holds the query's span: the record carries its ids
	span.End(trace.WithTimestamp(end))
}

// parentOf is the application's span a query carried (model.Query's
// TraceID and ParentSpanID, read from its sqlcommenter traceparent).
func parentOf(q *model.Query) (trace.SpanContext, bool) {
	if q.TraceID == "" || q.ParentSpanID == "" {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	if _, err := hex.Decode(tid[:], []byte(q.TraceID)); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(sid[:], []byte(q.ParentSpanID)); err != nil {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return sc, sc.IsValid()
}
