// Package exporter turns what a trace measures into Prometheus metrics:
// the I/O of each role by layer, the histograms down the stack, the drop
// counters and the queries seen, under the ecosystem's conventions
// (`_total` counters, seconds and bytes, HELP from the catalog). It knows
// nothing of BPF: `dbiolat serve` feeds it the session's intervals and
// histograms, and a Prometheus registry collects it.
package exporter

import (
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbiolat/dbiolat/internal/container"
	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
)

// Exporter holds the counters since the start; Add and SetHists feed it,
// Collect (any goroutine) reads it.
//
// When tracing pauses (duty cycles), what was measured while traced is
// scaled by the inverse of the traced ratio (SetTraced): the counters and
// histograms estimate all the time, and dbiolat_traced_ratio says how
// much of it was measured. The drop counters are what the kernel counted.
type Exporter struct {
	mu     sync.Mutex
	io     map[ioKey]*ioTotals
	hists  map[string]*scaledHist // accumulated from the kernel's, scaled
	kernel model.Hists            // the kernel's as last seen (cumulative)
	// The query histogram is the records', by server and database (the
	// kernel's others are the host's): observed, then weighed at Add.
	queryHists   map[serverDB]*scaledHist
	queryPending map[serverDB]*hist.Hist
	// The catalog's ByRole histograms: the intervals', by server,
	// database and role, weighed at Add.
	roleHists map[roleHist]*scaledHist
	drops     model.Drops // cumulative
	queries   float64
	records   float64
	traced    float64     // the share of the time traced; 1: all of it
	cost      *model.Cost // the last measure of the tracer's own cost; nil: none yet
	fps       *fingerprints
	servers   []model.Server  // traced now
	layers    map[string]bool // each layer (probe family) that can be traced: whether it is now
}

// scaledHist is a histogram's counts added up with weights.
type scaledHist struct {
	buckets [hist.Slots]float64
	sum     float64
}

// serverDB is a database of a server (model.ServerName).
type serverDB struct{ server, database string }

// roleHist is a histogram of one role of a server's database.
type roleHist struct{ name, server, database, role string }

// maxServerDBs bounds the query histograms: past it, a server's other
// databases share database="other".
const maxServerDBs = 200

// ioKey is one row of I/O: a layer ("fs", "blk"), a server, a database,
// a role and, for block I/O, a device.
type ioKey struct{ layer, server, database, role, device string }

// ioTotals are a row's operations, bytes and time, by operation.
type ioTotals struct {
	ops, bytes map[string]float64
}

// New returns an empty exporter that gives series of their own to at
// most top fingerprints.
func New(top int) *Exporter {
	return &Exporter{io: map[ioKey]*ioTotals{}, hists: map[string]*scaledHist{}, traced: 1, fps: newFingerprints(top),
		queryHists: map[serverDB]*scaledHist{}, queryPending: map[serverDB]*hist.Hist{}, roleHists: map[roleHist]*scaledHist{}}
}

// SetTraced says which share of the time the next Add's interval was
// traced in (0 < ratio <= 1): what it counted, and the queries observed
// since the last Add, count 1/ratio times.
func (e *Exporter) SetTraced(ratio float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.traced = ratio
}

// Observe counts a finished query under its fingerprint, unless the
// kernel counted it (AddStatements has it).
func (e *Exporter) Observe(q *model.Query) {
	if q.Counted {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fps.observe(q)
	e.queryHist(q).AddN(q.QueryNs+q.EarlierNs, uint64(q.Statements)) // a statement's latency: its earlier parts' too
}

// AddStatements counts what the kernel counted under statement identities
// since the last call, as Observe counts records.
func (e *Exporter) AddStatements(cs []model.StatementCounts) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range cs {
		e.fps.observe(c.Sums)
		e.queryHist(c.Sums).Merge(c.Latencies)
	}
}

// queryHist is where a query's latency goes until the next Add: its
// server and database's (past maxServerDBs, database="other").
func (e *Exporter) queryHist(q *model.Query) *hist.Hist {
	k := serverDB{model.ServerName(q.DataDir, q.Container), q.Database}
	if e.queryHists[k] == nil && e.queryPending[k] == nil && len(e.queryHists)+len(e.queryPending) >= maxServerDBs {
		k.database = OtherFingerprint
	}
	h := e.queryPending[k]
	if h == nil {
		h = &hist.Hist{}
		e.queryPending[k] = h
	}
	return h
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
	w := 1 / e.traced
	e.fps.flush(w)
	for k, h := range e.queryPending {
		s := e.queryHists[k]
		if s == nil {
			s = &scaledHist{}
			e.queryHists[k] = s
		}
		s.add(h, w)
	}
	clear(e.queryPending)
	e.queries += w * float64(iv.Queries)
	e.records += float64(iv.Records)
	e.drops = iv.Drops
	for _, rh := range iv.RoleHists {
		for name, h := range rh.Hists {
			k := roleHist{name, rh.Server, rh.Database, rh.Role}
			s := e.roleHists[k]
			if s == nil {
				s = &scaledHist{}
				e.roleHists[k] = s
			}
			s.add(h, w)
		}
	}
	for _, r := range iv.Rates {
		k := ioKey{r.Layer, r.Server, r.Database, r.Role, r.Device}
		t := e.io[k]
		if t == nil {
			t = &ioTotals{ops: map[string]float64{}, bytes: map[string]float64{}}
			e.io[k] = t
		}
		// Rates are counts over seconds: multiplied back, they are the
		// counts again (to the float's rounding, removed here), then weighed.
		count := func(ops float64) float64 { return w * math.Round(ops*iv.Seconds) }
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

// SetServers says which servers are traced now (dbiolat_server_info).
func (e *Exporter) SetServers(ss []model.Server) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.servers = ss
}

// SetLayers says which of all the layers (probe families: wire, fs,
// block...) are traced now (dbiolat_layer_traced): a dashboard's empty
// panel of the file system's series then says why.
func (e *Exporter) SetLayers(all, traced []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.layers = map[string]bool{}
	for _, l := range all {
		e.layers[l] = slices.Contains(traced, l)
	}
}

// SetCost keeps the last measure of what tracing costs.
func (e *Exporter) SetCost(c *model.Cost) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cost = c
}

// SetHists takes the host's histograms as they are now (the kernel's,
// cumulative): what they gained since the last call is added, weighed.
// The query histogram and those kept by role come from Observe and Add.
func (e *Exporter) SetHists(hs model.Hists) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := 1 / e.traced
	for name, h := range hs {
		if def, _ := model.HistogramOf(name); name == queryHist || def.ByRole {
			continue
		}
		prev := e.kernel[name]
		if prev == nil {
			prev = &hist.Hist{}
		}
		s := e.hists[name]
		if s == nil {
			s = &scaledHist{}
			e.hists[name] = s
		}
		gained := &hist.Hist{Sum: h.Sum - prev.Sum}
		for i := range h.Buckets {
			gained.Buckets[i] = h.Buckets[i] - prev.Buckets[i]
		}
		s.add(gained, w)
	}
	e.kernel = hs
}

// add adds a histogram's counts, each w times.
func (s *scaledHist) add(h *hist.Hist, w float64) {
	for i, n := range h.Buckets {
		s.buckets[i] += w * float64(n)
	}
	s.sum += w * float64(h.Sum)
}

var (
	queriesDesc = prometheus.NewDesc("dbiolat_queries_total",
		"Queries seen finished, recorded or not.", nil, nil)
	recordsDesc = prometheus.NewDesc("dbiolat_query_records_total",
		"Query records the kernel sent to user space (serve: only those chosen for the export, naming a statement identity, or that no identity counts; the others are counted in the kernel).", nil, nil)
	ioLabels = []string{"layer", "server", "database", "role", "device", "op"}
	opsDesc  = prometheus.NewDesc("dbiolat_io_operations_total",
		"I/O operations by layer (fs: file system calls; blk: block requests), the server, database and role of the process or thread that did them (none of them for I/O not ours), device (blk) and operation.",
		ioLabels, nil)
	bytesDesc = prometheus.NewDesc("dbiolat_io_bytes_total",
		"Bytes read or written, by layer, server, database, role, device (blk) and operation.",
		ioLabels, nil)
	serverDesc = prometheus.NewDesc("dbiolat_server_info",
		"A server traced, 1: what the server label of the other series stands for, and where it runs (k8s_*: its pod, from its cgroup and the pod's files).",
		[]string{"server", "kind", "version", "pid", "data_dir", "port", "container_runtime", "container_id", "k8s_pod_uid", "k8s_namespace", "k8s_pod"}, nil)
	serversDesc = prometheus.NewDesc("dbiolat_servers_traced",
		"The database servers traced now: 0 while none runs (serve waits for one to start) or one traced has exited and not come back.", nil, nil)
	dropsDesc = prometheus.NewDesc("dbiolat_drops_total",
		"What the trace could not deliver or attribute, by kind (the summary's drops); loss=true: records or events are missing.",
		[]string{"kind", "loss"}, nil)
	layerDesc = prometheus.NewDesc("dbiolat_layer_traced",
		"1 when the layer's kernel hooks are attached, 0 when not: fs (file system calls) with serve --fs only; wire or usdt (queries), block, sched (the waterfall), buffers, fuse, mysql-wire.",
		[]string{"layer"}, nil)
	tracedDesc = prometheus.NewDesc("dbiolat_traced_ratio",
		"The share of the time the probes are attached: counters are what was measured in it.", nil, nil)
	bpfCPUDesc = prometheus.NewDesc("dbiolat_bpf_cpu_ratio",
		"CPU seconds per second in dbiolat's kernel programs, on all CPUs (the kernel's statistics, counted a while every minute: a second, or a whole duty cycle, paused time included).", nil, nil)
	bpfRunsDesc = prometheus.NewDesc("dbiolat_bpf_runs_per_second",
		"Runs of dbiolat's kernel programs per second: the events handled (sampled as dbiolat_bpf_cpu_ratio).", nil, nil)
	bpfMapsDesc = prometheus.NewDesc("dbiolat_bpf_map_bytes",
		"Kernel memory of dbiolat's BPF maps, fixed when they are loaded.", nil, nil)
)

// queryHist is the catalog's histogram made of the records, by server
// and database; the ByRole ones are by server, database and role; the
// others are the host's.
const queryHist = "query"

// histDesc describes one of the catalog's histograms.
func histDesc(h model.Histogram) *prometheus.Desc {
	name, help := "dbiolat_"+h.Name+"_duration_seconds", h.Title+" (seconds). "+h.Source
	if h.Unit == hist.Bytes {
		name, help = "dbiolat_"+h.Name+"_bytes", h.Title+" (bytes). "+h.Source
	}
	switch {
	case h.Name == queryHist:
		return prometheus.NewDesc(name, help+" By server and database.", []string{"server", "database"}, nil)
	case h.ByRole:
		return prometheus.NewDesc(name, help+" By the server, database and role of the process or thread that did the I/O.", []string{"server", "database", "role"}, nil)
	}
	return prometheus.NewDesc(name, help+" The host's.", nil, nil)
}

// Describe sends the descriptions of every metric the exporter has.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{queriesDesc, recordsDesc, opsDesc, bytesDesc, serverDesc, serversDesc, dropsDesc, layerDesc, tracedDesc, bpfCPUDesc, bpfRunsDesc, bpfMapsDesc} {
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
	ch <- prometheus.MustNewConstMetric(queriesDesc, prometheus.CounterValue, e.queries)
	ch <- prometheus.MustNewConstMetric(recordsDesc, prometheus.CounterValue, e.records)
	ch <- prometheus.MustNewConstMetric(tracedDesc, prometheus.GaugeValue, e.traced)
	for l, on := range e.layers {
		v := 0.0
		if on {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(layerDesc, prometheus.GaugeValue, v, l)
	}
	if c := e.cost; c != nil {
		if c.BPFSampledSeconds > 0 {
			ch <- prometheus.MustNewConstMetric(bpfCPUDesc, prometheus.GaugeValue, c.BPFCPUPerSec)
			ch <- prometheus.MustNewConstMetric(bpfRunsDesc, prometheus.GaugeValue, c.BPFRunsPerSec)
		}
		ch <- prometheus.MustNewConstMetric(bpfMapsDesc, prometheus.GaugeValue, float64(c.BPFMapBytes))
	}
	for k, t := range e.io {
		for op, n := range t.ops {
			ch <- prometheus.MustNewConstMetric(opsDesc, prometheus.CounterValue, n, k.layer, k.server, k.database, k.role, k.device, op)
		}
		for op, n := range t.bytes {
			ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, n, k.layer, k.server, k.database, k.role, k.device, op)
		}
	}
	ch <- prometheus.MustNewConstMetric(serversDesc, prometheus.GaugeValue, float64(len(e.servers)))
	for _, s := range e.servers {
		var c container.Info
		if s.Container != nil {
			c = *s.Container
		}
		ch <- prometheus.MustNewConstMetric(serverDesc, prometheus.GaugeValue, 1, s.Name, s.Kind, s.Version, strconv.Itoa(s.PID),
			s.DataDir, strconv.Itoa(s.Port), c.Runtime, c.ID, c.PodUID, c.Namespace, c.Pod)
	}
	for _, c := range model.Counters {
		loss := "false"
		if c.Loss {
			loss = "true"
		}
		ch <- prometheus.MustNewConstMetric(dropsDesc, prometheus.CounterValue, float64(e.drops[c.Name]), c.Name, loss)
	}
	e.fps.collect(ch)
	for k, h := range e.roleHists {
		def, _ := model.HistogramOf(k.name)
		ch <- constHistogram(histDesc(def), def.Unit, h.rounded(), k.server, k.database, k.role)
	}
	for _, def := range model.Histograms {
		if def.ByRole {
			continue
		}
		if def.Name == queryHist {
			for k, h := range e.queryHists {
				ch <- constHistogram(histDesc(def), def.Unit, h.rounded(), k.server, k.database)
			}
			continue
		}
		h := e.hists[def.Name]
		if h == nil {
			h = &scaledHist{}
		}
		ch <- constHistogram(histDesc(def), def.Unit, h.rounded())
	}
}

// rounded is the histogram in whole counts, its count their sum:
// rounding what only grows never goes down, so it stays monotonic.
func (s *scaledHist) rounded() *hist.Hist {
	h := &hist.Hist{Sum: uint64(math.Round(s.sum))}
	for i, n := range s.buckets {
		h.Buckets[i] = uint64(math.Round(n))
		h.Count += h.Buckets[i]
	}
	return h
}

// constHistogram is a log2 histogram as a Prometheus one: a bucket per
// slot, its bound the slot's last value (slot i holds [2^i, 2^(i+1)): le
// 2^(i+1)-1 nanoseconds or bytes, exactly), in seconds for times. Slots
// above the highest used are left out (+Inf holds everything).
func constHistogram(d *prometheus.Desc, unit hist.Unit, h *hist.Hist, labels ...string) prometheus.Metric {
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
	return prometheus.MustNewConstHistogram(d, h.Count, float64(h.Sum)*scale, buckets, labels...)
}
