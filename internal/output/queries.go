package output

import (
	"fmt"
	"io"
	"iter"
	"slices"
	"sort"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/mysql"
	"github.com/dbiolat/dbiolat/internal/postgres"
)

// FingerprintStats sums the recorded queries of one fingerprint: what the
// terminal and HTML reports list, and what compare sets side by side.
type FingerprintStats struct {
	Fingerprint string
	Query       string // the text of its first query
	Calls       int
	TotalNs     uint64
	CPUNs       uint64
	FSNs        uint64 // in file system calls (across the waterfall's boxes)
	BlkNs       uint64
	IOWaitNs    uint64
	BoxNs       []uint64 // summed per box of the waterfall, in model.Boxes' order
}

// MeanNs is the mean query time.
func (f *FingerprintStats) MeanNs() uint64 { return f.TotalNs / uint64(max(f.Calls, 1)) }

// IOShare is the fraction of the time spent asleep waiting for I/O.
func (f *FingerprintStats) IOShare() float64 { return float64(f.IOWaitNs) / float64(max(f.TotalNs, 1)) }

// ByFingerprint groups queries by fingerprint, the most total time first
// (ties by fingerprint, so the order is stable). It holds one entry per
// fingerprint, not the queries.
func ByFingerprint(qs iter.Seq[model.Query]) []FingerprintStats {
	index := map[string]int{}
	var list []FingerprintStats
	for q := range qs {
		k, ok := index[q.Fingerprint]
		if !ok {
			k = len(list)
			index[q.Fingerprint] = k
			list = append(list, FingerprintStats{Fingerprint: q.Fingerprint, Query: q.Query, BoxNs: make([]uint64, len(model.Boxes))})
		}
		f := &list[k]
		f.Calls += q.Statements
		f.TotalNs += q.QueryNs
		f.CPUNs += q.CPUNs
		f.FSNs += q.FSNs()
		f.BlkNs += q.BlkNs
		f.IOWaitNs += q.IOWaitNs
		for i, b := range model.Boxes {
			f.BoxNs[i] += *b.Of(&q)
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].TotalNs != list[j].TotalNs {
			return list[i].TotalNs > list[j].TotalNs
		}
		return list[i].Fingerprint < list[j].Fingerprint
	})
	return list
}

// Calls counts the queries of fingerprint sums.
func Calls(fps []FingerprintStats) int {
	n := 0
	for _, f := range fps {
		n += f.Calls
	}
	return n
}

// Recorded is a recording's summary with the queries the recording holds
// (fps, its fingerprints) as the ones reported: the summary counts the
// queries the trace saw, and "reported", for slowlog the queries printed,
// is for a recording the ones it kept. The count is taken from the file,
// not from the summary: recordings made before record counted what it
// wrote say 0 there.
func Recorded(s *model.Summary, fps []FingerprintStats) *model.Summary {
	c := *s
	c.Reported = uint64(Calls(fps))
	return &c
}

// FingerprintTable prints the fingerprints of a recording with the most
// total time (at most top of them).
func FingerprintTable(w io.Writer, fps []FingerprintStats, top int) {
	shown := fps[:max(0, min(top, len(fps)))]
	fmt.Fprintf(w, "\n%d queries recorded, %d fingerprints; the %d with the most time:\n", Calls(fps), len(fps), len(shown))
	fmt.Fprintf(w, "%7s %10s %10s %10s %10s %10s %9s  %s\n", "calls", "total", "mean", "cpu", "fs", "io wait", "io share", "query")
	for _, f := range shown {
		fmt.Fprintf(w, "%7d %10s %10s %10s %10s %10s %8.0f%%  %.80s\n", f.Calls, dur(f.TotalNs), dur(f.MeanNs()), dur(f.CPUNs),
			dur(f.FSNs), dur(f.IOWaitNs), 100*f.IOShare(), OneLine(f.Query))
	}
}

// Slowest returns the n slowest queries, slowest first (the earlier of
// two equally slow); it holds no more than n of them.
func Slowest(qs iter.Seq[model.Query], n int) []model.Query {
	out := make([]model.Query, 0, n+1)
	for q := range qs {
		i := sort.Search(len(out), func(i int) bool { return out[i].QueryNs < q.QueryNs })
		if i < n {
			out = slices.Insert(out, i, q)[:min(len(out)+1, n)]
		}
	}
	return out
}

// Background says a process run is background work (autovacuum, parallel
// workers, checkpointer, InnoDB's threads...), shown as a line of its own:
// connections are shown as their queries, and a server's main process (or
// thread) run is the whole trace.
func Background(p *model.Process) bool {
	switch p.Role {
	case string(postgres.ClientBackend), string(postgres.Postmaster), mysql.RoleConnection, mysql.RoleServer:
		return false
	}
	return true
}

// BackgroundRuns returns the process runs of background work.
func BackgroundRuns(ps []model.Process) []model.Process {
	var out []model.Process
	for _, p := range ps {
		if Background(&p) {
			out = append(out, p)
		}
	}
	return out
}

// QueryDelta is one fingerprint found in both recordings of a comparison.
type QueryDelta struct {
	Fingerprint string  `json:"fingerprint"`
	Query       string  `json:"query"`
	CallsA      int     `json:"calls_a"`
	CallsB      int     `json:"calls_b"`
	TotalA      uint64  `json:"total_ns_a"`
	TotalB      uint64  `json:"total_ns_b"`
	MeanA       float64 `json:"mean_ns_a"`
	MeanB       float64 `json:"mean_ns_b"`
	MeanRatio   float64 `json:"mean_ratio"` // B / A; 0 when A's mean is 0
	IOWaitA     float64 `json:"mean_io_wait_ns_a"`
	IOWaitB     float64 `json:"mean_io_wait_ns_b"`
	// The mean call's waterfall in each recording: time per call in each
	// box, by the box's name (model.Boxes), so that a reader sees which
	// box the fingerprint's change is in.
	BoxesA map[string]float64 `json:"mean_box_ns_a"`
	BoxesB map[string]float64 `json:"mean_box_ns_b"`
}

// boxMeans are a fingerprint's box times per call, by box name.
func boxMeans(f *FingerprintStats) map[string]float64 {
	m := make(map[string]float64, len(model.Boxes))
	for i, b := range model.Boxes {
		m[b.Name] = float64(f.BoxNs[i]) / float64(max(f.Calls, 1))
	}
	return m
}

// TotalChange is B's total time minus A's, in nanoseconds.
func (d *QueryDelta) TotalChange() int64 { return int64(d.TotalB) - int64(d.TotalA) }

// QueryDeltas sets side by side the fingerprints present in both lists of
// queries, the largest absolute change in total time first (ties by
// fingerprint), at most top of them; and says how many there were in all.
func QueryDeltas(a, b iter.Seq[model.Query], top int) (deltas []QueryDelta, common int) {
	fa := map[string]FingerprintStats{}
	for _, f := range ByFingerprint(a) {
		fa[f.Fingerprint] = f
	}
	for _, y := range ByFingerprint(b) {
		x, ok := fa[y.Fingerprint]
		if !ok || x.Calls == 0 || y.Calls == 0 { // only parts of statements (suspended portals)
			continue
		}
		d := QueryDelta{Fingerprint: y.Fingerprint, Query: x.Query, CallsA: x.Calls, CallsB: y.Calls,
			TotalA: x.TotalNs, TotalB: y.TotalNs,
			MeanA: float64(x.TotalNs) / float64(x.Calls), MeanB: float64(y.TotalNs) / float64(y.Calls),
			IOWaitA: float64(x.IOWaitNs) / float64(x.Calls), IOWaitB: float64(y.IOWaitNs) / float64(y.Calls),
			BoxesA: boxMeans(&x), BoxesB: boxMeans(&y)}
		if d.MeanA > 0 {
			d.MeanRatio = d.MeanB / d.MeanA
		}
		deltas = append(deltas, d)
	}
	abs := func(x int64) int64 {
		if x < 0 {
			return -x
		}
		return x
	}
	sort.Slice(deltas, func(i, j int) bool {
		ci, cj := abs(deltas[i].TotalChange()), abs(deltas[j].TotalChange())
		if ci != cj {
			return ci > cj
		}
		return deltas[i].Fingerprint < deltas[j].Fingerprint
	})
	common = len(deltas)
	if deltas == nil {
		deltas = []QueryDelta{} // JSON: an empty list, not null
	}
	return deltas[:max(0, min(top, len(deltas)))], common
}

// FormatChange formats a signed change of time: "+12.3ms", "-4us", "0ns".
func FormatChange(ns int64) string {
	switch {
	case ns > 0:
		return "+" + dur(uint64(ns))
	case ns < 0:
		return "-" + dur(uint64(-ns))
	}
	return "0ns"
}
