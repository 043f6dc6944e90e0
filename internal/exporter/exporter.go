// Package exporter turns what a trace measures into Prometheus metrics:
// the I/O of each role by layer, the histograms down the stack, the drop
// counters and the queries seen, under the ecosystem's conventions
// (`_total` counters, seconds and bytes, HELP from the catalog). It knows
// nothing of BPF: `dbiolat serve` feeds it the session's intervals and
// histograms, and a Prometheus registry collects it.
package exporter

import (
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
)

// Exporter holds the counters since the start; Add and SetHists feed it,
// Collect (any goroutine) reads it.
type Exporter struct {
	mu      sync.Mutex
	io      map[ioKey]*ioTotals
	hists   model.Hists // cumulative, as the kernel keeps them
	drops   model.Drops // cumulative
	queries uint64
	cost    *model.Cost // the last measure of the tracer's own cost; nil: none yet
	fps     *fingerprints
}

// ioKey is one row of I/O: a layer ("fs", "blk"), a role and, for block
// I/O, a device.
type ioKey struct{ layer, role, device string }

// ioTotals are a row's operations, bytes and time, by operation.
type ioTotals struct {
	ops, bytes map[string]float64
}

// New returns an empty exporter that gives series of their own to at
// most top fingerprints.
func New(top int) *Exporter {
	return &Exporter{io: map[ioKey]*ioTotals{}, fps: newFingerprints(top)}
}

// Observe counts a finished query under its fingerprint.
func (e *Exporter) Observe(q *model.Query) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fps.observe(q)
}

// EndWindow gives the window's busiest fingerprints their series (at most
// top: see fingerprints) and starts the next window.
func (e *Exporter) EndWindow() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fps.endWindow()
}

// Queries maps each fingerprint that has series to its normalized text.
func (e *Exporter) Queries() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fps.queries()
}

// Add adds what an interval saw: its rates (per second) times its
// seconds, its queries; its drops are the kernel's running totals.
func (e *Exporter) Add(iv *model.Interval) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.queries += iv.Queries
	e.drops = iv.Drops
	for _, r := range iv.Rates {
		k := ioKey{r.Layer, r.Role, r.Device}
		t := e.io[k]
		if t == nil {
			t = &ioTotals{ops: map[string]float64{}, bytes: map[string]float64{}}
			e.io[k] = t
		}
		// Rates are counts over seconds: multiplied back, they are the
		// counts again (to the float's rounding, removed below).
		count := func(ops float64) float64 { return math.Round(ops * iv.Seconds) }
		t.ops["read"] += count(r.ReadOps)
		t.ops["write"] += count(r.WriteOps)
		t.bytes["read"] += count(r.ReadBytes)
		t.bytes["write"] += count(r.WriteBytes)
		if r.Layer == "fs" {
			t.ops["sync"] += count(r.SyncOps)
		} else {
			t.ops["other"] += count(r.OtherOps) // flushes, discards: no bytes
		}
	}
}

// SetCost keeps the last measure of what tracing costs.
func (e *Exporter) SetCost(c *model.Cost) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cost = c
}

// SetHists keeps the histograms as they are now (the kernel's, cumulative).
func (e *Exporter) SetHists(hs model.Hists) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hists = hs
}

var (
	queriesDesc = prometheus.NewDesc("dbiolat_queries_total",
		"Queries seen finished, recorded or not.", nil, nil)
	opsDesc = prometheus.NewDesc("dbiolat_io_operations_total",
		"I/O operations by layer (fs: file system calls; blk: block requests), the role of the process or thread that did them, device (blk) and operation.",
		[]string{"layer", "role", "device", "op"}, nil)
	bytesDesc = prometheus.NewDesc("dbiolat_io_bytes_total",
		"Bytes read or written, by layer, role, device (blk) and operation.",
		[]string{"layer", "role", "device", "op"}, nil)
	dropsDesc = prometheus.NewDesc("dbiolat_drops_total",
		"What the trace could not deliver or attribute, by kind (the summary's drops); loss=true: records or events are missing.",
		[]string{"kind", "loss"}, nil)
	tracedDesc = prometheus.NewDesc("dbiolat_traced_ratio",
		"The share of the time the probes are attached: counters are what was measured in it.", nil, nil)
	bpfCPUDesc = prometheus.NewDesc("dbiolat_bpf_cpu_ratio",
		"CPU seconds per second in dbiolat's kernel programs, on all CPUs (the kernel's statistics, sampled one second in every minute).", nil, nil)
	bpfRunsDesc = prometheus.NewDesc("dbiolat_bpf_runs_per_second",
		"Runs of dbiolat's kernel programs per second: the events handled (sampled as dbiolat_bpf_cpu_ratio).", nil, nil)
	bpfMapsDesc = prometheus.NewDesc("dbiolat_bpf_map_bytes",
		"Kernel memory of dbiolat's BPF maps, fixed when they are loaded.", nil, nil)
)

// histDesc describes one of the catalog's histograms.
func histDesc(h model.Histogram) *prometheus.Desc {
	name, help := "dbiolat_"+h.Name+"_duration_seconds", h.Title+" (seconds). "+h.Source
	if h.Unit == hist.Bytes {
		name, help = "dbiolat_"+h.Name+"_bytes", h.Title+" (bytes). "+h.Source
	}
	return prometheus.NewDesc(name, help, nil, nil)
}

// Describe sends the descriptions of every metric the exporter has.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{queriesDesc, opsDesc, bytesDesc, dropsDesc, tracedDesc, bpfCPUDesc, bpfRunsDesc, bpfMapsDesc} {
		ch <- d
	}
	for _, h := range model.Histograms {
		ch <- histDesc(h)
	}
	for _, d := range fpDescs {
		ch <- d
	}
}

// Collect sends the metrics as they are now.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(queriesDesc, prometheus.CounterValue, float64(e.queries))
	ch <- prometheus.MustNewConstMetric(tracedDesc, prometheus.GaugeValue, 1) // traced all the time, for now
	if c := e.cost; c != nil {
		if c.BPFSampledSeconds > 0 {
			ch <- prometheus.MustNewConstMetric(bpfCPUDesc, prometheus.GaugeValue, c.BPFCPUPerSec)
			ch <- prometheus.MustNewConstMetric(bpfRunsDesc, prometheus.GaugeValue, c.BPFRunsPerSec)
		}
		ch <- prometheus.MustNewConstMetric(bpfMapsDesc, prometheus.GaugeValue, float64(c.BPFMapBytes))
	}
	for k, t := range e.io {
		for op, n := range t.ops {
			ch <- prometheus.MustNewConstMetric(opsDesc, prometheus.CounterValue, n, k.layer, k.role, k.device, op)
		}
		for op, n := range t.bytes {
			ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, n, k.layer, k.role, k.device, op)
		}
	}
	for _, c := range model.Counters {
		loss := "false"
		if c.Loss {
			loss = "true"
		}
		ch <- prometheus.MustNewConstMetric(dropsDesc, prometheus.CounterValue, float64(e.drops[c.Name]), c.Name, loss)
	}
	e.fps.collect(ch)
	for _, def := range model.Histograms {
		h := e.hists[def.Name]
		if h == nil {
			h = &hist.Hist{}
		}
		ch <- constHistogram(histDesc(def), def.Unit, h)
	}
}

// constHistogram is a log2 histogram as a Prometheus one: a bucket per
// slot, its bound the slot's last value (slot i holds [2^i, 2^(i+1)): le
// 2^(i+1)-1 nanoseconds or bytes, exactly), in seconds for times. Slots
// above the highest used are left out (+Inf holds everything).
func constHistogram(d *prometheus.Desc, unit hist.Unit, h *hist.Hist) prometheus.Metric {
	scale := 1.0
	if unit == hist.Time {
		scale = 1e-9
	}
	top := 0
	for i, n := range h.Buckets {
		if n > 0 {
			top = i
		}
	}
	buckets := map[float64]uint64{}
	var cum uint64
	for i := 0; i <= top && i < hist.Slots-1; i++ {
		cum += h.Buckets[i]
		_, hi := hist.SlotRange(i)
		buckets[float64(hi-1)*scale] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, float64(h.Sum)*scale, buckets)
}
