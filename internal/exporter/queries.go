package exporter

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbiolat/dbiolat/internal/model"
)

// Per-fingerprint series, bounded whatever the workload: at most `top`
// fingerprints have series of their own, the ones with the most query
// time in the last window, and every other query counts in the series
// fingerprint="other". Membership is sticky for a window: a fingerprint
// admitted starts from zero, one evicted has its counts folded into
// "other", so every series only grows and the series add up to every
// query observed.

// OtherFingerprint labels the series of the queries no series of their
// own holds.
const OtherFingerprint = "other"

// maxCandidates bounds the fingerprints whose time is kept in a window,
// competing for a series: memory, not series, and enough to find the
// busiest ones among many.
const maxCandidates = 10000

// infoTextMax is how much of a normalized query its info series carries
// (label values are kept short); /queries has the whole text.
const infoTextMax = 200

// fpStats are one series' counters.
type fpStats struct {
	text     string // normalized
	calls    uint64
	ns       uint64
	boxes    []uint64 // by model.Boxes
	fsCount  [3]uint64
	fsNs     [3]uint64 // read, write, sync
	blkCount uint64
	blkNs    uint64
	windowNs uint64 // query time in the current window
}

var fsOps = [3]string{"read", "write", "sync"}

func (s *fpStats) add(q *model.Query) {
	s.calls++
	s.ns += q.QueryNs
	s.windowNs += q.QueryNs
	if s.boxes == nil {
		s.boxes = make([]uint64, len(model.Boxes))
	}
	for i, b := range model.Boxes {
		s.boxes[i] += *b.Of(q)
	}
	for i, c := range [3]uint64{q.FSReadCount, q.FSWriteCount, q.FSSyncCount} {
		s.fsCount[i] += c
	}
	for i, ns := range [3]uint64{q.FSReadNs, q.FSWriteNs, q.FSSyncNs} {
		s.fsNs[i] += ns
	}
	s.blkCount += q.BlkCount
	s.blkNs += q.BlkNs
}

// fold adds another series' counters to s.
func (s *fpStats) fold(o *fpStats) {
	s.calls += o.calls
	s.ns += o.ns
	if s.boxes == nil {
		s.boxes = make([]uint64, len(model.Boxes))
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

// fingerprints is the bounded set of per-fingerprint series.
type fingerprints struct {
	top        int
	series     map[string]*fpStats
	other      fpStats
	candidates map[string]*fpStats // not in series: time and text in the window
}

func newFingerprints(top int) *fingerprints {
	return &fingerprints{top: top, series: map[string]*fpStats{}, candidates: map[string]*fpStats{}}
}

func (f *fingerprints) observe(q *model.Query) {
	if s := f.series[q.Fingerprint]; s != nil {
		s.add(q)
		return
	}
	f.other.add(q)
	c := f.candidates[q.Fingerprint]
	if c == nil {
		if len(f.candidates) >= maxCandidates {
			return
		}
		c = &fpStats{text: q.Query}
		f.candidates[q.Fingerprint] = c
	}
	c.windowNs += q.QueryNs
}

// endWindow admits the window's busiest candidates, evicting series
// that were less busy in it, and starts the next window.
func (f *fingerprints) endWindow() {
	type ranked struct {
		fp string
		ns uint64
	}
	var cands []ranked
	for fp, c := range f.candidates {
		cands = append(cands, ranked{fp, c.windowNs})
	}
	slices.SortFunc(cands, func(a, b ranked) int { return cmpDesc(a.ns, b.ns) })
	for _, c := range cands {
		if len(f.series) >= f.top {
			// The least busy series in the window gives way to a busier candidate.
			least, leastNs := "", ^uint64(0)
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
}

func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

var (
	fpLabels    = []string{"fingerprint"}
	callsDesc   = prometheus.NewDesc("dbiolat_fingerprint_calls_total", "Queries finished, by fingerprint (the busiest by query time; fingerprint=\"other\": the rest).", fpLabels, nil)
	timeDesc    = prometheus.NewDesc("dbiolat_fingerprint_query_seconds_total", "Query time, by fingerprint.", fpLabels, nil)
	boxDesc     = prometheus.NewDesc("dbiolat_fingerprint_box_seconds_total", "Query time by where it went (the waterfall's boxes: cpu, runq, io_wait, lock...), by fingerprint.", []string{"fingerprint", "box"}, nil)
	fpFSDesc    = prometheus.NewDesc("dbiolat_fingerprint_fs_operations_total", "File system calls of the queries, by fingerprint and operation.", []string{"fingerprint", "op"}, nil)
	fpFSNsDesc  = prometheus.NewDesc("dbiolat_fingerprint_fs_seconds_total", "Time in file system calls of the queries, by fingerprint and operation.", []string{"fingerprint", "op"}, nil)
	fpBlkDesc   = prometheus.NewDesc("dbiolat_fingerprint_block_requests_total", "Block requests the queries started, by fingerprint.", fpLabels, nil)
	fpBlkNsDesc = prometheus.NewDesc("dbiolat_fingerprint_block_seconds_total", "Time of the block requests the queries started, by fingerprint.", fpLabels, nil)
	infoDesc    = prometheus.NewDesc("dbiolat_fingerprint_info", "A fingerprint's normalized query (literals replaced; the first 200 characters; /queries has it whole).", []string{"fingerprint", "query"}, nil)
)

var fpDescs = []*prometheus.Desc{callsDesc, timeDesc, boxDesc, fpFSDesc, fpFSNsDesc, fpBlkDesc, fpBlkNsDesc, infoDesc}

func (f *fingerprints) collect(ch chan<- prometheus.Metric) {
	emit := func(fp string, s *fpStats) {
		counter := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{fp}, labels...)...)
		}
		counter(callsDesc, float64(s.calls))
		counter(timeDesc, float64(s.ns)/1e9)
		for i, b := range model.Boxes {
			var ns uint64
			if s.boxes != nil {
				ns = s.boxes[i]
			}
			counter(boxDesc, float64(ns)/1e9, strings.TrimSuffix(b.Name, "_ns"))
		}
		for i, op := range fsOps {
			counter(fpFSDesc, float64(s.fsCount[i]), op)
			counter(fpFSNsDesc, float64(s.fsNs[i])/1e9, op)
		}
		counter(fpBlkDesc, float64(s.blkCount))
		counter(fpBlkNsDesc, float64(s.blkNs)/1e9)
		if fp != OtherFingerprint {
			ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, fp, shorten(s.text, infoTextMax))
		}
	}
	for fp, s := range f.series {
		emit(fp, s)
	}
	emit(OtherFingerprint, &f.other)
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
	for fp, s := range f.series {
		out[fp] = s.text
	}
	return out
}
