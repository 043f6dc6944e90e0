package output

import (
	"fmt"
	"io"
	"math"

	"github.com/dbiolat/dbiolat/internal/hist"

	"github.com/dbiolat/dbiolat/internal/model"
)

// LayerDiff is one layer and operation of two recordings side by side.
type LayerDiff struct {
	Layer     string  `json:"layer"`
	CountA    uint64  `json:"count_a"`
	CountB    uint64  `json:"count_b"`
	MeanA     float64 `json:"mean_ns_a"`
	MeanB     float64 `json:"mean_ns_b"`
	P50A      uint64  `json:"p50_ns_a"`
	P50B      uint64  `json:"p50_ns_b"`
	P99A      uint64  `json:"p99_ns_a"`
	P99B      uint64  `json:"p99_ns_b"`
	MeanRatio float64 `json:"mean_ratio"` // B / A
}

// Comparison is what compare prints: per layer, the verdict, and the
// query fingerprints found in both recordings (set by the caller with
// QueryDeltas: the histograms alone do not have them).
type Comparison struct {
	Type    string      `json:"type"` // "comparison"
	Layers  []LayerDiff `json:"layers"`
	Verdict string      `json:"verdict"`
	// How the verdict was reached, when the recordings share queries
	// (Chain); else it compares the histograms alone.
	Chain   []Step       `json:"chain"`
	Queries []QueryDelta `json:"queries"`              // the largest changes in total time first
	Common  int          `json:"fingerprints_in_both"` // how many fingerprints both recordings have
	Fio     []FioDiff    `json:"fio,omitempty"`        // bench recordings: fio's runs side by side
}

// A layer differs when its mean moves by this factor or more.
const differs = 1.5

// Compare sets the latency histograms of two recordings side by side and
// names the layer where the difference arises, walking down the stack:
// file system reads, then the block device under them.
func Compare(a, b model.Hists) *Comparison {
	c := &Comparison{Type: "comparison", Queries: []QueryDelta{}}
	for _, def := range model.Histograms {
		ha, hb := a[def.Name], b[def.Name]
		if ha == nil || hb == nil || ha.Count == 0 || hb.Count == 0 || def.Unit != hist.Time {
			continue
		}
		c.Layers = append(c.Layers, LayerDiff{Layer: def.Name, CountA: ha.Count, CountB: hb.Count,
			MeanA: ha.Mean(), MeanB: hb.Mean(), P50A: ha.Quantile(0.5), P50B: hb.Quantile(0.5),
			P99A: ha.Quantile(0.99), P99B: hb.Quantile(0.99), MeanRatio: hb.Mean() / ha.Mean()})
	}
	c.Verdict = verdict(c.Layers)
	return c
}

func verdict(ls []LayerDiff) string {
	get := func(name string) *LayerDiff {
		for i := range ls {
			if ls[i].Layer == name {
				return &ls[i]
			}
		}
		return nil
	}
	fs, blk := get("fs_read"), get("blk_read")
	if miss := get("fs_read_miss"); miss != nil {
		fs = miss // the reads that reached below the page cache
	}
	switch {
	case fs == nil && blk != nil: // recorded without --fs
		return fmt.Sprintf("no file system reads timed in both recordings (record with --fs to see above the block device); block device reads %.2fx (mean %s → %s)",
			blk.MeanRatio, dur(uint64(blk.MeanA)), dur(uint64(blk.MeanB)))
	case fs == nil:
		return "no file system or block reads in both recordings: nothing to compare down the stack"
	case fs.MeanRatio < differs && fs.MeanRatio > 1/differs:
		return fmt.Sprintf("file system reads are alike (mean %.2fx): no layer differs by %.1fx or more", fs.MeanRatio, differs)
	case blk != nil && explains(blk, fs):
		return fmt.Sprintf("file system reads %.2fx (mean %s → %s) and block device reads %.2fx (mean %s → %s): the difference arises at the block device",
			fs.MeanRatio, dur(uint64(fs.MeanA)), dur(uint64(fs.MeanB)), blk.MeanRatio, dur(uint64(blk.MeanA)), dur(uint64(blk.MeanB)))
	case blk != nil:
		return fmt.Sprintf("file system reads %.2fx (mean %s → %s) while block device reads did not follow (%.2fx): the time is added above the block device (file system, page cache, or block cgroup throttling)",
			fs.MeanRatio, dur(uint64(fs.MeanA)), dur(uint64(fs.MeanB)), blk.MeanRatio)
	default:
		return fmt.Sprintf("file system reads %.2fx (mean %s → %s), with no block reads to compare", fs.MeanRatio, dur(uint64(fs.MeanA)), dur(uint64(fs.MeanB)))
	}
}

// explains says whether the layer below moved the same way as the one
// above by at least half as much time a request as the one above moved a
// call: then the difference arises in it. Judged on the time added, not
// on ratios: a fast device that gets a few slow requests doubles its
// mean, yet adds little beside a throttle that adds milliseconds above it.
func explains(below, above *LayerDiff) bool {
	dBelow, dAbove := below.MeanB-below.MeanA, above.MeanB-above.MeanA
	return dBelow*dAbove > 0 && math.Abs(dBelow) >= math.Abs(dAbove)/2
}

// PrintComparison prints a comparison as a table and its verdict.
func PrintComparison(w io.Writer, c *Comparison) {
	fmt.Fprintf(w, "%-13s %9s %9s %10s %10s %10s %10s %10s %10s %7s\n", "layer", "count A", "count B", "mean A", "mean B", "p50 A", "p50 B", "p99 A", "p99 B", "B/A")
	for _, l := range c.Layers {
		fmt.Fprintf(w, "%-13s %9d %9d %10s %10s %10s %10s %10s %10s %6.2fx\n", l.Layer, l.CountA, l.CountB,
			dur(uint64(l.MeanA)), dur(uint64(l.MeanB)), dur(l.P50A), dur(l.P50B), dur(l.P99A), dur(l.P99B), l.MeanRatio)
	}
	if len(c.Fio) > 0 {
		PrintFioDiffs(w, c.Fio)
	}
	fmt.Fprintf(w, "\nverdict: %s\n", c.Verdict)
	PrintChain(w, c.Chain)
	if c.Common == 0 {
		fmt.Fprintf(w, "\nno query fingerprint is in both recordings\n")
		return
	}
	fmt.Fprintf(w, "\n%d query fingerprints in both recordings; the %d whose total time changed most:\n", c.Common, len(c.Queries))
	fmt.Fprintf(w, "%8s %8s %10s %10s %7s %10s %10s %11s  %s\n", "calls A", "calls B", "mean A", "mean B", "B/A", "io wait A", "io wait B", "total B-A", "query")
	for _, d := range c.Queries {
		fmt.Fprintf(w, "%8d %8d %10s %10s %6.2fx %10s %10s %11s  %.70s\n", d.CallsA, d.CallsB, dur(uint64(d.MeanA)), dur(uint64(d.MeanB)),
			d.MeanRatio, dur(uint64(d.IOWaitA)), dur(uint64(d.IOWaitB)), FormatChange(d.TotalChange()), OneLine(d.Query))
	}
}
