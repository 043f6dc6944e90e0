package exporter

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
)

// gather collects the exporter into metric families by name.
func gather(t *testing.T, e *Exporter) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// labeled finds the metric of a family whose labels are all of want.
func labeled(f *dto.MetricFamily, want map[string]string) *dto.Metric {
	for _, m := range f.GetMetric() {
		n := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
				n++
			}
		}
		if n == len(want) {
			return m
		}
	}
	return nil
}

// Intervals add up to counters: rates times seconds, summed.
func TestIntervalsAddUp(t *testing.T) {
	e := New(10)
	for _, secs := range []float64{0.5, 1.5} {
		e.Add(&model.Interval{Seconds: secs, Queries: 10, Drops: model.Drops{"ringbuf_full": 3},
			Rates: []model.Rate{
				{Layer: "fs", Role: "client backend", ReadOps: 100, ReadBytes: 8192 * 100, SyncOps: 2},
				{Layer: "blk", Role: "checkpointer", Device: "vda", WriteOps: 10, WriteBytes: 40960},
			}})
	}
	fams := gather(t, e)
	if got := fams["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue(); got != 20 {
		t.Errorf("queries: %v, want 20", got)
	}
	for _, c := range []struct {
		family string
		labels map[string]string
		want   float64
	}{
		{"dbiolat_io_operations_total", map[string]string{"layer": "fs", "role": "client backend", "op": "read"}, 200},
		{"dbiolat_io_operations_total", map[string]string{"layer": "fs", "role": "client backend", "op": "sync"}, 4},
		{"dbiolat_io_bytes_total", map[string]string{"layer": "fs", "role": "client backend", "op": "read"}, 8192 * 200},
		{"dbiolat_io_operations_total", map[string]string{"layer": "blk", "role": "checkpointer", "device": "vda", "op": "write"}, 20},
		{"dbiolat_drops_total", map[string]string{"kind": "ringbuf_full", "loss": "true"}, 3},
	} {
		m := labeled(fams[c.family], c.labels)
		if m == nil || m.GetCounter().GetValue() != c.want {
			t.Errorf("%s%v = %v, want %v", c.family, c.labels, m.GetCounter().GetValue(), c.want)
		}
	}
}

// A log2 histogram becomes a Prometheus one with the same counts: bucket
// le 2^(i+1)-1 ns holds slots 0..i, in seconds; the sum is exact.
func TestHistogramBuckets(t *testing.T) {
	h := &hist.Hist{}
	for _, ns := range []uint64{1, 3, 1000, 1023, 1024, 5_000_000} {
		h.Add(ns)
	}
	e := New(10)
	e.SetHists(model.Hists{"fs_read": h})
	got := gather(t, e)["dbiolat_fs_read_duration_seconds"].GetMetric()[0].GetHistogram()
	if got.GetSampleCount() != 6 || math.Abs(got.GetSampleSum()-float64(h.Sum)*1e-9) > 1e-15 {
		t.Errorf("count %d sum %v, want 6 and %v", got.GetSampleCount(), got.GetSampleSum(), float64(h.Sum)*1e-9)
	}
	want := map[float64]uint64{1e-9: 1, 3e-9: 2, 1023e-9: 4, 2047e-9: 5, 8388607e-9: 6}
	for _, b := range got.GetBucket() {
		if n, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != n {
			t.Errorf("le %v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), n)
		}
	}
}

// Names, units, HELP texts and types follow Prometheus's conventions (its
// own linter), for every metric the exporter has.
func TestMetricsLint(t *testing.T) {
	e := New(10)
	e.Add(&model.Interval{Seconds: 1, Rates: []model.Rate{{Layer: "fs", Role: "r", ReadOps: 1}}})
	e.SetHists(model.Hists{"query": &hist.Hist{}})
	e.SetCost(&model.Cost{BPFSampledSeconds: 1, BPFCPUPerSec: 0.01, BPFRunsPerSec: 1e5, BPFMapBytes: 1 << 20})
	problems, err := testutil.CollectAndLint(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
