// Package otlp sends query records to an OpenTelemetry collector (serve
// --otlp): for each query chosen, a log record shaped as the Collector's
// PostgreSQL receiver's db.server.query_sample event, and a SERVER span
// with the waterfall's boxes as its children, inside the application's
// trace when the query carried a sqlcommenter traceparent. It reads only
// internal/model and its catalog, as the other outputs do.
//
// The trace loop must never wait for a collector: Offer chooses (a
// threshold, a sample, a rate) and hands the query to a bounded queue
// without blocking; a goroutine makes the records from the queue and
// exports them in batches with the SDK's OTLP exporters, which retry
// with backoff. A full queue or a failed export drops records, each loss
// counted by signal and reason (Counts: /metrics and the summary).
package otlp

import (
	"context"
	"errors"
	"sync"
	"time"

	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/dbiolat/dbiolat/internal/model"
)

// Config is what to send and how much.
type Config struct {
	// Threshold: queries at least this long are sent (negative: none);
	// Sample: the share of the others drawn at random; Rate: at most this
	// many queries a second in all.
	Threshold time.Duration
	Sample    float64
	Rate      float64
	// Queue bounds the queries waiting to be exported (0: 2048).
	Queue int
	// Resource describes dbiolat to the collector (service.name...).
	Resource *resource.Resource
	// Host names the servers traced: server.address.
	Host string
}

const (
	defaultQueue = 2048
	batchMax     = 512             // queries per export
	flushEvery   = time.Second     // a batch not full waits at most this long
	scopeName    = "dbiolat/otlp"  // the instrumentation scope of its spans and records
	exportBudget = 2 * time.Minute // one batch's export, retries included (the exporters' own give up after 30 s)
	// maxAttributes bounds a record's attributes (the SDK's default, 128,
	// is close to what a query with many named waits has).
	maxAttributes = 256
)

// Exporter chooses queries and exports them. Offer is for the trace
// loop; Counts for any goroutine; Close once, at the end.
type Exporter struct {
	cfg     Config
	chooser *chooser
	queue   chan *model.Query
	stop    chan struct{}
	done    chan struct{}
	counts  *counts

	spanExp sdktrace.SpanExporter
	logExp  sdklog.Exporter
	spans   *spanBatch
	logs    *logBatch
	tracer  trace.Tracer
	logger  otellog.Logger
	tp      *sdktrace.TracerProvider
	lp      *sdklog.LoggerProvider

	ctx    context.Context // cancelled when Close's time is up: exports in flight give up
	cancel context.CancelFunc
	once   sync.Once
}

// New starts an exporter sending through the given SDK exporters (see
// Exporters for the ones an endpoint names).
func New(cfg Config, spanExp sdktrace.SpanExporter, logExp sdklog.Exporter) *Exporter {
	if cfg.Queue <= 0 {
		cfg.Queue = defaultQueue
	}
	if cfg.Resource == nil {
		cfg.Resource = resource.Empty()
	}
	e := &Exporter{cfg: cfg, chooser: newChooser(cfg.Threshold, cfg.Sample, cfg.Rate), queue: make(chan *model.Query, cfg.Queue),
		stop: make(chan struct{}), done: make(chan struct{}), counts: newCounts(),
		spanExp: spanExp, logExp: logExp, spans: &spanBatch{}, logs: &logBatch{}}
	// The providers only make records: sampling is ours (every span of a
	// chosen query is kept), batching and exporting too.
	// A record's attributes are bounded by the catalog and the kernel's
	// named waits per query, under maxAttributes: none is cut.
	limits := sdktrace.NewSpanLimits()
	limits.AttributeCountLimit = maxAttributes
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(cfg.Resource), sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(e.spans), sdktrace.WithRawSpanLimits(limits))
	e.lp = sdklog.NewLoggerProvider(sdklog.WithResource(cfg.Resource), sdklog.WithProcessor(e.logs), sdklog.WithAttributeCountLimit(maxAttributes))
	e.tracer, e.logger = e.tp.Tracer(scopeName), e.lp.Logger(scopeName)
	e.ctx, e.cancel = context.WithCancel(context.Background())
	go e.run()
	return e
}

// Offer hands a finished query to the export, or counts why not; it
// never blocks. The trace loop's goroutine only: the choice is not
// locked.
func (e *Exporter) Offer(q *model.Query) {
	if reason := e.chooser.choose(q, time.Now()); reason != "" {
		e.counts.both(reason, 1)
		return
	}
	select {
	case e.queue <- q:
	default:
		e.counts.both("queue_full", 1)
	}
}

// NotChosen counts n queries the kernel counted and did not choose (under
// the threshold, not drawn for the sample): they never became records,
// and are not_sampled as those Go did not choose are.
func (e *Exporter) NotChosen(n int) { e.counts.both("not_sampled", n) }

// Counts are the records offered so far by signal and outcome.
func (e *Exporter) Counts() []model.OTLPCount { return e.counts.list() }

// Close exports what is queued, waiting at most until ctx's deadline
// (what is left then is counted as export_failed), and shuts the
// exporters down.
func (e *Exporter) Close(ctx context.Context) error {
	e.once.Do(func() { close(e.stop) })
	select {
	case <-e.done:
	case <-ctx.Done():
		e.cancel() // the export in flight gives up; run counts what it did not send
		<-e.done
	}
	e.cancel()
	return errors.Join(e.spanExp.Shutdown(ctx), e.logExp.Shutdown(ctx), e.tp.Shutdown(ctx), e.lp.Shutdown(ctx))
}

// run takes queries off the queue and exports them in batches: when a
// batch is full, a second after its first query, and at Close.
func (e *Exporter) run() {
	defer close(e.done)
	batch := make([]*model.Query, 0, batchMax)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	for {
		select {
		case q := <-e.queue:
			if batch = append(batch, q); len(batch) < batchMax {
				continue
			}
		case <-tick.C:
		case <-e.stop:
			for drained := false; !drained; { // what was queued before Close
				select {
				case q := <-e.queue:
					if batch = append(batch, q); len(batch) == batchMax {
						e.export(batch)
						batch = batch[:0]
					}
				default:
					drained = true
				}
			}
			e.export(batch)
			return
		}
		e.export(batch)
		batch = batch[:0]
	}
}

// export makes a batch's records and sends both signals at once; an
// export that fails, retries included, drops its records.
func (e *Exporter) export(batch []*model.Query) {
	if len(batch) == 0 {
		return
	}
	if e.ctx.Err() != nil { // Close's time is up
		e.counts.both("export_failed", len(batch))
		return
	}
	now := time.Now()
	for _, q := range batch {
		record(e.tracer, e.logger, q, e.cfg.Host, now)
	}
	spans, logs := e.spans.take(), e.logs.take()
	ctx, cancel := context.WithTimeout(e.ctx, exportBudget)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		outcome := sent
		if err := e.spanExp.ExportSpans(ctx, spans); err != nil {
			outcome = "export_failed"
		}
		e.counts.add("traces", outcome, len(batch))
	})
	outcome := sent
	if err := e.logExp.Export(ctx, logs); err != nil {
		outcome = "export_failed"
	}
	e.counts.add("logs", outcome, len(batch))
	wg.Wait()
}
