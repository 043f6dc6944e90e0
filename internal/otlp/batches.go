package otlp

import (
	"context"
	"sync"

	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The SDK's providers make the spans and log records (ids, resource,
// scope, times as given); these processors only collect what they made
// into a batch, which the export loop takes and sends with the SDK's
// exporters. The SDK's own batch processors would drop records silently
// when full: the bounded queue before them (Exporter.Offer) counts every
// loss instead.

// spanBatch collects ended spans.
type spanBatch struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (b *spanBatch) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (b *spanBatch) OnEnd(s sdktrace.ReadOnlySpan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spans = append(b.spans, s)
}
func (b *spanBatch) Shutdown(context.Context) error   { return nil }
func (b *spanBatch) ForceFlush(context.Context) error { return nil }

// take returns the spans collected and starts a new batch.
func (b *spanBatch) take() []sdktrace.ReadOnlySpan {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.spans
	b.spans = nil
	return s
}

// logBatch collects emitted log records.
type logBatch struct {
	mu      sync.Mutex
	records []sdklog.Record
}

func (b *logBatch) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (b *logBatch) OnEmit(_ context.Context, r *sdklog.Record) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.records = append(b.records, r.Clone()) // the SDK reuses r
	return nil
}
func (b *logBatch) Shutdown(context.Context) error   { return nil }
func (b *logBatch) ForceFlush(context.Context) error { return nil }

// take returns the records collected and starts a new batch.
func (b *logBatch) take() []sdklog.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.records
	b.records = nil
	return r
}
