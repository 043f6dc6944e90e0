package exporter

import (
	"maps"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/dbiolat/dbiolat/internal/container"
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
	e.SetHists(model.Hists{"runq": h})
	got := gather(t, e)["dbiolat_runq_duration_seconds"].GetMetric()[0].GetHistogram()
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

// The I/O histograms are by server, database and role: each interval's
// are added, weighed by the traced share as the counters are; the
// kernel's host-wide ones of the same names are not exported again.
func TestRoleHistograms(t *testing.T) {
	read := func(ns ...uint64) *hist.Hist {
		h := &hist.Hist{}
		for _, v := range ns {
			h.Add(v)
		}
		return h
	}
	e := New(10)
	e.SetTraced(0.5) // each count stands for two
	for range 2 {
		e.Add(&model.Interval{Seconds: 1, RoleHists: []model.RoleHists{
			{Server: "/srv/pg", Database: "app", Role: "client backend", Hists: model.Hists{"fs_read": read(1000, 2_000_000)}},
			{Server: "/srv/pg", Role: "checkpointer", Hists: model.Hists{"fs_sync": read(5_000_000)}},
		}})
	}
	e.SetHists(model.Hists{"fs_read": read(1, 1, 1, 1, 1, 1, 1)}) // the host's: left out
	f := gather(t, e)
	for _, c := range []struct {
		family string
		labels map[string]string
		count  uint64
		sum    float64
	}{
		{"dbiolat_fs_read_duration_seconds", map[string]string{"server": "/srv/pg", "database": "app", "role": "client backend"}, 8, 4 * 2_001_000e-9},
		{"dbiolat_fs_sync_duration_seconds", map[string]string{"server": "/srv/pg", "database": "", "role": "checkpointer"}, 4, 4 * 5_000_000e-9},
	} {
		m := labeled(f[c.family], c.labels)
		if m == nil {
			t.Fatalf("no %s%v", c.family, c.labels)
		}
		if h := m.GetHistogram(); h.GetSampleCount() != c.count || math.Abs(h.GetSampleSum()-c.sum) > 1e-12 {
			t.Errorf("%s%v: count %d sum %v, want %d and %v", c.family, c.labels, h.GetSampleCount(), h.GetSampleSum(), c.count, c.sum)
		}
	}
	if n := len(f["dbiolat_fs_read_duration_seconds"].GetMetric()); n != 1 {
		t.Errorf("%d fs_read series, want the backend's only", n)
	}
}

// Names, units, HELP texts and types follow Prometheus's conventions (its
// own linter), for every metric the exporter has.
func TestMetricsLint(t *testing.T) {
	e := New(10)
	e.Add(&model.Interval{Seconds: 1, Rates: []model.Rate{{Layer: "fs", Role: "r", ReadOps: 1}},
		RoleHists: []model.RoleHists{{Role: "r", Hists: model.Hists{"blk_read_size": &hist.Hist{}}}}})
	e.SetHists(model.Hists{"query": &hist.Hist{}})
	e.SetCost(&model.Cost{BPFSampledSeconds: 1, BPFCPUPerSec: 0.01, BPFRunsPerSec: 1e5, BPFMapBytes: 1 << 20})
	e.SetLayers([]string{"wire", "fs"}, []string{"wire"})
	problems, err := testutil.CollectAndLint(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// Every layer that can be traced has its gauge: 1 traced, 0 not (serve
// without --fs: its file system panels are empty for that reason).
func TestLayersTraced(t *testing.T) {
	e := New(10)
	e.SetLayers([]string{"wire", "fs", "block", "sched"}, []string{"wire", "block", "sched"})
	got := map[string]float64{}
	for _, m := range gather(t, e)["dbiolat_layer_traced"].GetMetric() {
		got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	if want := map[string]float64{"wire": 1, "fs": 0, "block": 1, "sched": 1}; !maps.Equal(got, want) {
		t.Errorf("dbiolat_layer_traced %v, want %v", got, want)
	}
}

// Two servers, one in a pod: series carry the server (named by its pod
// and data directory) and database; dbiolat_server_info says where each
// runs; a fingerprint run in both has a series in each, its text once.
func TestSeriesNameTheirServer(t *testing.T) {
	pod := &container.Info{Runtime: "containerd", ID: "0f1e2d3c4b5a69788796a5b4c3d2e1f0", PodUID: "7c6b5a49-3827-4165-a4b3-c2d1e0f9a8b7", Namespace: "prod", Pod: "pg-0"}
	bare := &container.Info{Runtime: "docker", ID: "5e4d3c2b1a0f9e8d7c6b5a4f"}
	for _, c := range []struct {
		dir  string
		in   *container.Info
		want string
	}{
		{"/srv/pg", nil, "/srv/pg"},
		{"/var/lib/postgresql/data", pod, "prod/pg-0:/var/lib/postgresql/data"},
		{"/var/lib/mysql", bare, "5e4d3c2b1a0f:/var/lib/mysql"},
	} {
		if got := model.ServerName(c.dir, c.in); got != c.want {
			t.Errorf("ServerName(%s, %+v) = %q, want %q", c.dir, c.in, got, c.want)
		}
	}
	e := New(10)
	inPod := model.ServerName("/var/lib/postgresql/data", pod)
	e.SetServers([]model.Server{
		{Name: "/srv/pg", Kind: "PostgreSQL", Version: "15", PID: 100, DataDir: "/srv/pg", Port: 5432},
		{Name: inPod, Kind: "PostgreSQL", Version: "17", PID: 200, DataDir: "/var/lib/postgresql/data", Port: 5432, Container: pod},
	})
	e.Observe(&model.Query{Statements: 1, Fingerprint: "f1", Query: "SELECT 1", QueryNs: 10, DataDir: "/srv/pg", Database: "app"})
	e.Observe(&model.Query{Statements: 1, Fingerprint: "f1", Query: "SELECT 1", QueryNs: 10, DataDir: "/var/lib/postgresql/data", Container: pod, Database: "app"})
	e.Add(&model.Interval{Seconds: 1, Rates: []model.Rate{
		{Layer: "fs", Server: inPod, Database: "app", Role: "client backend", ReadOps: 5},
		{Layer: "fs", Server: inPod, Role: "checkpointer", WriteOps: 2},
	}})
	e.EndWindow()
	fams := gather(t, e)
	for _, s := range []string{"/srv/pg", inPod} {
		if labeled(fams["dbiolat_fingerprint_calls_total"], map[string]string{"server": s, "database": "app", "fingerprint": "f1"}) == nil {
			t.Errorf("no series of f1 in %s", s)
		}
	}
	if n := len(fams["dbiolat_fingerprint_info"].GetMetric()); n != 1 {
		t.Errorf("%d info series for one fingerprint", n)
	}
	if m := labeled(fams["dbiolat_io_operations_total"], map[string]string{"server": inPod, "database": "app", "role": "client backend", "op": "read"}); m.GetCounter().GetValue() != 5 {
		t.Errorf("the pod's backend reads: %v", m)
	}
	if labeled(fams["dbiolat_io_operations_total"], map[string]string{"server": inPod, "database": "", "role": "checkpointer", "op": "write"}) == nil {
		t.Errorf("no writes of the pod's checkpointer")
	}
	for _, s := range []string{"/srv/pg", inPod} {
		if m := labeled(fams["dbiolat_query_duration_seconds"], map[string]string{"server": s, "database": "app"}); m.GetHistogram().GetSampleCount() != 1 {
			t.Errorf("query histogram of %s: %v", s, m)
		}
	}
	info := map[string]string{"server": inPod, "kind": "PostgreSQL", "version": "17", "pid": "200", "data_dir": "/var/lib/postgresql/data",
		"container_runtime": "containerd", "container_id": pod.ID, "k8s_pod_uid": pod.PodUID, "k8s_namespace": "prod", "k8s_pod": "pg-0"}
	if labeled(fams["dbiolat_server_info"], info) == nil || labeled(fams["dbiolat_server_info"], map[string]string{"server": "/srv/pg", "container_id": ""}) == nil {
		t.Errorf("dbiolat_server_info: %v", fams["dbiolat_server_info"])
	}
}
