package exporter

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbiolat/dbiolat/internal/model"
)

// Per-fingerprint series, bounded whatever the workload: at most `top`
// fingerprints (each in a server and database, from an application: its
// label bounded apart, see applications) have series of their own, the ones with the most query
// time in the last window, and every other query counts in the series
// fingerprint="other". Membership is sticky for a window: a fingerprint
// admitted starts from zero, one evicted has its counts folded into
// "other", so every series only grows and the series add up to every
// query observed.

// OtherFingerprint labels the series of the queries no series of their
// own holds.
const OtherFingerprint = model.OtherFingerprint

// maxCandidates bounds the fingerprints whose time is kept in a window,
// competing for a series: memory, not series, and enough to find the
// busiest ones among many.
const maxCandidates = 10000

// infoTextMax is how much of a normalized query its info series carries
// (label values are kept short); /queries has the whole text.
const infoTextMax = 200

// fpStats are one series' counters: estimates for all the time when
// tracing pauses (each query weighs the inverse of the traced ratio).
type fpStats struct {
	text     string // normalized
	calls    float64
	ns       float64
	boxes    []float64 // by model.Boxes
	fsCount  [3]float64
	fsNs     [3]float64 // read, write, sync
	blkCount float64
	blkNs    float64
	windowNs float64 // query time in the current window
}

var fsOps = [3]string{"read", "write", "sync"}

// add counts a query w times (1 when traced all the time).
func (s *fpStats) add(q *model.Query, w float64) {
	s.calls += w * float64(q.Statements)
	s.ns += w * float64(q.QueryNs)
	s.windowNs += w * float64(q.QueryNs)
	if s.boxes == nil {
		s.boxes = make([]float64, len(model.Boxes))
	}
	for i, b := range model.Boxes {
		s.boxes[i] += w * float64(*b.Of(q))
	}
	for i, c := range [3]uint64{q.FSReadCount, q.FSWriteCount, q.FSSyncCount} {
		s.fsCount[i] += w * float64(c)
	}
	for i, ns := range [3]uint64{q.FSReadNs, q.FSWriteNs, q.FSSyncNs} {
		s.fsNs[i] += w * float64(ns)
	}
	s.blkCount += w * float64(q.BlkCount)
	s.blkNs += w * float64(q.BlkNs)
}

// scale weighs every counter w times.
func (s *fpStats) scale(w float64) {
	s.calls *= w
	s.ns *= w
	s.windowNs *= w
	for i := range s.boxes {
		s.boxes[i] *= w
	}
	for i := range s.fsCount {
		s.fsCount[i] *= w
		s.fsNs[i] *= w
	}
	s.blkCount *= w
	s.blkNs *= w
}

// fold adds another series' counters to s.
func (s *fpStats) fold(o *fpStats) {
	s.calls += o.calls
	s.ns += o.ns
	if s.boxes == nil {
		s.boxes = make([]float64, len(model.Boxes))
	}
	for i := range o.boxes {
		s.boxes[i] += o.boxes[i]
	}
	for i := range s.fsCount {
		s.fsCount[i] += o.fsCount[i]
		s.fsNs[i] += o.fsNs[i]
	}
	s.blkCount += o.blkCount
	s.blkNs += o.blkNs
}

// fpKey is what a series counts: a fingerprint's queries in a server
// (model.ServerName) and database, from an application (its label), and
// PostgreSQL's query id for them when the server computes one ("" when
// not), so the series join pg_stat_statements.
type fpKey struct{ server, database, application, fingerprint, queryid string }

// otherKey is the series of the queries no other holds, of any
// application.
var otherKey = fpKey{application: OtherApplication, fingerprint: OtherFingerprint}

// fingerprints is the bounded set of per-fingerprint series.
type fingerprints struct {
	top        int
	apps       *applications
	series     map[fpKey]*fpStats
	other      fpStats
	candidates map[fpKey]*fpStats // not in series: time and text in the window
	// The queries observed since the last flush, by key (at most
	// maxCandidates, the rest in pendingOther), not yet weighed: a duty
	// cycle's weight is known at its end.
	pending      map[fpKey]*fpStats
	pendingOther fpStats
}

func newFingerprints(top int) *fingerprints {
	return &fingerprints{top: top, apps: newApplications(), series: map[fpKey]*fpStats{}, candidates: map[fpKey]*fpStats{},
		pending: map[fpKey]*fpStats{}}
}

// observe keeps a query until the next flush.
func (f *fingerprints) observe(q *model.Query) {
	if q.Fingerprint == OtherFingerprint { // counted together already (the kernel's table was full)
		f.pendingOther.add(q, 1)
		return
	}
	k := fpKey{model.ServerName(q.DataDir, q.Container), q.Database, f.apps.label(q.Application, float64(q.QueryNs)), q.Fingerprint, ""}
	if q.QueryID != 0 {
		k.queryid = strconv.FormatInt(q.QueryID, 10)
	}
	p := f.pending[k]
	if p == nil {
		if len(f.pending) >= maxCandidates {
			f.pendingOther.add(q, 1)
			return
		}
		p = &fpStats{text: q.Query}
		f.pending[k] = p
	}
	p.add(q, 1)
}

// flush counts the queries observed since the last flush, each w times:
// in its series, or in other and, for the window, as a candidate.
func (f *fingerprints) flush(w float64) {
	for fp, p := range f.pending {
		p.scale(w)
		if s := f.series[fp]; s != nil {
			s.fold(p)
			s.windowNs += p.windowNs
			continue
		}
		f.other.fold(p)
		c := f.candidates[fp]
		if c == nil && len(f.candidates) < maxCandidates {
			c = &fpStats{text: p.text}
			f.candidates[fp] = c
		}
		if c != nil {
			c.windowNs += p.windowNs
		}
	}
	f.pendingOther.scale(w)
	f.other.fold(&f.pendingOther)
	clear(f.pending)
	f.pendingOther = fpStats{}
}

// endWindow admits the window's busiest candidates, evicting series
// that were less busy in it, and starts the next window.
func (f *fingerprints) endWindow() {
	type ranked struct {
		fp fpKey
		ns float64
	}
	var cands []ranked
	for fp, c := range f.candidates {
		cands = append(cands, ranked{fp, c.windowNs})
	}
	slices.SortFunc(cands, func(a, b ranked) int { return cmpDesc(a.ns, b.ns) })
	for _, c := range cands {
		if len(f.series) >= f.top {
			// The least busy series in the window gives way to a busier candidate.
			var least fpKey
			leastNs := math.Inf(1)
			for fp, s := range f.series {
				if s.windowNs < leastNs {
					least, leastNs = fp, s.windowNs
				}
			}
			if c.ns <= leastNs {
				break
			}
			f.other.fold(f.series[least])
			delete(f.series, least)
		}
		f.series[c.fp] = &fpStats{text: f.candidates[c.fp].text, windowNs: c.ns} // ranked by it until the window ends
	}
	for _, s := range f.series {
		s.windowNs = 0
	}
	f.other.windowNs = 0
	clear(f.candidates)
	f.apps.endWindow()
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

var (
	fpLabels    = []string{"server", "database", "application", "fingerprint", "queryid"}
	fpAnd       = func(l string) []string { return append(slices.Clone(fpLabels), l) }
	callsDesc   = prometheus.NewDesc("dbiolat_fingerprint_calls_total", "Queries finished, by server, database, application, fingerprint and query id (PostgreSQL's, as pg_stat_statements keys them; the busiest by query time; fingerprint=\"other\": the rest, of any server; application=\"other\": beyond the busiest applications).", fpLabels, nil)
	timeDesc    = prometheus.NewDesc("dbiolat_fingerprint_query_seconds_total", "Query time, by fingerprint.", fpLabels, nil)
	boxDesc     = prometheus.NewDesc("dbiolat_fingerprint_box_seconds_total", "Query time by where it went (the waterfall's boxes: cpu, runq, io_wait, lock...), by fingerprint.", fpAnd("box"), nil)
	fpFSDesc    = prometheus.NewDesc("dbiolat_fingerprint_fs_operations_total", "File system calls of the queries, by fingerprint and operation.", fpAnd("op"), nil)
	fpFSNsDesc  = prometheus.NewDesc("dbiolat_fingerprint_fs_seconds_total", "Time in file system calls of the queries, by fingerprint and operation.", fpAnd("op"), nil)
	fpBlkDesc   = prometheus.NewDesc("dbiolat_fingerprint_block_requests_total", "Block requests the queries started, by fingerprint.", fpLabels, nil)
	fpBlkNsDesc = prometheus.NewDesc("dbiolat_fingerprint_block_seconds_total", "Time of the block requests the queries started, by fingerprint.", fpLabels, nil)
	infoDesc    = prometheus.NewDesc("dbiolat_fingerprint_info", "A fingerprint's normalized query (literals replaced; the first 200 characters; /queries has it whole).", []string{"fingerprint", "query"}, nil)
)

var fpDescs = []*prometheus.Desc{callsDesc, timeDesc, boxDesc, fpFSDesc, fpFSNsDesc, fpBlkDesc, fpBlkNsDesc, infoDesc}

func (f *fingerprints) collect(ch chan<- prometheus.Metric) {
	described := map[string]bool{} // a fingerprint's text, once: it may run in several servers
	emit := func(k fpKey, s *fpStats) {
		counter := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{k.server, k.database, k.application, k.fingerprint, k.queryid}, labels...)...)
		}
		counter(callsDesc, s.calls)
		counter(timeDesc, s.ns/1e9)
		for i, b := range model.Boxes {
			var ns float64
			if s.boxes != nil {
				ns = s.boxes[i]
			}
			counter(boxDesc, ns/1e9, strings.TrimSuffix(b.Name, "_ns"))
		}
		for i, op := range fsOps {
			counter(fpFSDesc, s.fsCount[i], op)
			counter(fpFSNsDesc, s.fsNs[i]/1e9, op)
		}
		counter(fpBlkDesc, s.blkCount)
		counter(fpBlkNsDesc, s.blkNs/1e9)
		if k != otherKey && !described[k.fingerprint] {
			described[k.fingerprint] = true
			ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, k.fingerprint, shorten(s.text, infoTextMax))
		}
	}
	for k, s := range f.series {
		emit(k, s)
	}
	emit(otherKey, &f.other)
}

// shorten cuts text to at most n bytes, on a character boundary.
func shorten(text string, n int) string {
	if len(text) <= n {
		return text
	}
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n]
}

// Queries is what /queries lists: each fingerprint with a series, and
// its whole normalized text.
func (f *fingerprints) queries() map[string]string {
	out := map[string]string{}
	for k, s := range f.series {
		out[k.fingerprint] = s.text
	}
	return out
}
