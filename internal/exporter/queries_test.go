package exporter

import (
	"fmt"
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
)

// calls reads dbiolat_fingerprint_calls_total by fingerprint.
func calls(t *testing.T, e *Exporter) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range gather(t, e)["dbiolat_fingerprint_calls_total"].GetMetric() {
		out[fpLabel(m)] = m.GetCounter().GetValue()
	}
	return out
}

func fpLabel(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "fingerprint" {
			return l.GetValue()
		}
	}
	return ""
}

func query(fp string, ns uint64) *model.Query {
	return &model.Query{Statements: 1, Fingerprint: fp, Query: "SELECT " + fp, QueryNs: ns, CPUNs: ns}
}

// 100,000 distinct statements, in windows: never more than top+1 series,
// every series only grows, and they add up to every query observed.
func TestFingerprintSeriesBounded(t *testing.T) {
	const top, statements = 20, 100000
	e := New(top)
	prev := map[string]float64{}
	for i := 0; i < statements; i++ {
		e.Observe(query(fmt.Sprintf("%016x", i), uint64(i%977)*1000))
		if i%10000 == 9999 {
			e.Add(&model.Interval{}) // a second's interval: the queries observed in it count
			e.EndWindow()
			got := calls(t, e)
			if len(got) > top+1 {
				t.Fatalf("%d series after %d statements, want at most %d", len(got), i+1, top+1)
			}
			var sum float64
			for fp, n := range got {
				sum += n
				if n < prev[fp] {
					t.Errorf("%s went down: %v -> %v", fp, prev[fp], n)
				}
			}
			if sum != float64(i+1) {
				t.Errorf("the series add up to %v calls, %d were observed", sum, i+1)
			}
			prev = got
		}
	}
}

// The window's busiest fingerprints get series; a busier one later takes
// the place of the least busy, whose counts go to "other".
func TestFingerprintSeriesFollowTheBusiest(t *testing.T) {
	e := New(2)
	for _, fp := range []string{"a", "b", "c"} {
		e.Observe(query(fp, map[string]uint64{"a": 300, "b": 200, "c": 100}[fp]))
	}
	e.Add(&model.Interval{})
	e.EndWindow()
	e.Observe(query("a", 5))
	e.Observe(query("b", 1))
	e.Add(&model.Interval{})
	if got := calls(t, e); got["a"] != 1 || got["b"] != 1 || got[OtherFingerprint] != 3 || len(got) != 3 {
		t.Errorf("after the first window: %v, want a and b from zero, the first three in other", got)
	}
	e.Observe(query("c", 1000)) // the busiest of the window, b the least busy series
	e.Add(&model.Interval{})
	e.EndWindow()
	if got := calls(t, e); len(got) != 3 || got["c"] != 0 || got["a"] != 1 || got[OtherFingerprint] != 5 {
		t.Errorf("after the second window: %v, want c in place of b (b's call folded into other)", got)
	}
	if q := e.Queries(); q["c"] != "SELECT c" || len(q) != 2 {
		t.Errorf("/queries: %v", q)
	}
}

// Traced a tenth of the time, each query observed and each count of the
// interval stand for ten; the histograms' gains too (the query one, the
// records'; runq, the kernel's), and they stay whole.
func TestTracedRatioScales(t *testing.T) {
	e := New(5)
	e.Observe(query("a", 1000))
	e.Observe(query("a", 3000))
	e.SetTraced(0.1)
	e.Add(&model.Interval{Queries: 2, Seconds: 10})
	e.SetHists(model.Hists{"runq": histOf(1000, 3000)})
	e.EndWindow()
	e.Observe(query("a", 2000))
	e.Add(&model.Interval{Queries: 1, Seconds: 10})
	e.SetHists(model.Hists{"runq": histOf(1000, 3000, 2000)})
	mf := gather(t, e)
	if got := mf["dbiolat_queries_total"].GetMetric()[0].GetCounter().GetValue(); got != 30 {
		t.Errorf("queries_total %v, want 30 (3 queries traced a tenth of the time)", got)
	}
	if got := calls(t, e); got["a"] != 10 || got[OtherFingerprint] != 20 {
		t.Errorf("calls %v, want a 10 (since admitted) and other 20", got)
	}
	for _, name := range []string{"dbiolat_query_duration_seconds", "dbiolat_runq_duration_seconds"} {
		h := mf[name].GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 30 || math.Abs(h.GetSampleSum()-60000e-9) > 1e-12 {
			t.Errorf("%s: count %d sum %v, want 30 and 60 µs", name, h.GetSampleCount(), h.GetSampleSum())
		}
	}
	if got := mf["dbiolat_traced_ratio"].GetMetric()[0].GetGauge().GetValue(); got != 0.1 {
		t.Errorf("traced_ratio %v, want 0.1", got)
	}
}

func histOf(vs ...uint64) *hist.Hist {
	h := &hist.Hist{}
	for _, v := range vs {
		h.Add(v)
	}
	return h
}
