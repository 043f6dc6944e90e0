package output

import (
	"fmt"
	"io"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
)

// FioCheck is one fio run's latency beside what dbiolat measured for
// fio's process: the time of its read or write calls (for a psync job,
// the span fio's completion latency times) and of its block requests.
type FioCheck struct {
	Side model.FioSide // the direction fio did (read or write)
	Op   string        // "read" or "write"
	FS   *hist.Hist    // dbiolat's fs latency for fio's process; nil when none (libaio)
	Blk  *hist.Hist    // dbiolat's block latency for fio's process; nil when none
}

// CheckFio picks the direction of job j and sets dbiolat's latencies
// beside fio's.
func CheckFio(j *model.FioJob) FioCheck {
	c := FioCheck{Side: j.Read, Op: "read", FS: j.Hists["fs_read"], Blk: j.Hists["blk_read"]}
	if j.Write.Ops > j.Read.Ops {
		c = FioCheck{Side: j.Write, Op: "write", FS: j.Hists["fs_write"], Blk: j.Hists["blk_write"]}
	}
	if j.Engine != "psync" { // libaio's I/O is not in read/write calls
		c.FS = nil
	}
	return c
}

// FioTable prints a bench's fio reference: fio's own figures, then
// dbiolat's file system and block latency for fio's process.
func FioTable(w io.Writer, jobs []model.FioJob) {
	fmt.Fprintf(w, "%-14s %-6s %3s %8s %7s %9s %9s %9s | %9s %9s %9s\n", "fio job", "engine", "QD", "IOPS", "MB/s",
		"clat mean", "clat p50", "clat p99", "fs mean", "blk mean", "blk p50")
	mean := func(h *hist.Hist) string {
		if h == nil {
			return "-"
		}
		return dur(uint64(h.Mean()))
	}
	for i := range jobs {
		j := &jobs[i]
		c := CheckFio(j)
		p50 := "-"
		if c.Blk != nil {
			p50 = dur(c.Blk.Quantile(0.5))
		}
		fmt.Fprintf(w, "%-14s %-6s %3d %8.0f %7.1f %9s %9s %9s | %9s %9s %9s\n", j.Name, j.Engine, j.IODepth, c.Side.IOPS,
			c.Side.BWBytes/1e6, dur(uint64(c.Side.ClatMeanNs)), dur(c.Side.ClatP50Ns), dur(c.Side.ClatP99Ns), mean(c.FS), mean(c.Blk), p50)
	}
	fmt.Fprint(w, `IOPS to clat p99 are fio's own JSON output. fs: dbiolat's time of fio's read/write
calls (with psync the span fio's clat times); blk: dbiolat's block_io_start to
block_io_done of fio's requests, below fs by the system call and the wake-up.
`)
}

// FioDiff is one fio run of two bench recordings side by side: what fio
// measured, and what the block device did under it.
type FioDiff struct {
	Name      string  `json:"name"`
	Op        string  `json:"op"` // "read" or "write"
	IOPSA     float64 `json:"iops_a"`
	IOPSB     float64 `json:"iops_b"`
	ClatMeanA float64 `json:"clat_mean_ns_a"`
	ClatMeanB float64 `json:"clat_mean_ns_b"`
	ClatRatio float64 `json:"clat_ratio"` // B / A
	BlkMeanA  float64 `json:"blk_mean_ns_a"`
	BlkMeanB  float64 `json:"blk_mean_ns_b"`
	BlkRatio  float64 `json:"blk_ratio"` // B / A; 0 when either has no block requests
}

// CompareFio sets the fio runs both recordings have side by side.
func CompareFio(a, b []model.FioJob) []FioDiff {
	var out []FioDiff
	for i := range a {
		for k := range b {
			if a[i].Name != b[k].Name {
				continue
			}
			ca, cb := CheckFio(&a[i]), CheckFio(&b[k])
			d := FioDiff{Name: a[i].Name, Op: ca.Op, IOPSA: ca.Side.IOPS, IOPSB: cb.Side.IOPS,
				ClatMeanA: ca.Side.ClatMeanNs, ClatMeanB: cb.Side.ClatMeanNs}
			if d.ClatMeanA > 0 {
				d.ClatRatio = d.ClatMeanB / d.ClatMeanA
			}
			if ca.Blk != nil && cb.Blk != nil {
				d.BlkMeanA, d.BlkMeanB = ca.Blk.Mean(), cb.Blk.Mean()
				d.BlkRatio = d.BlkMeanB / d.BlkMeanA
			}
			out = append(out, d)
		}
	}
	return out
}

// PrintFioDiffs prints the fio runs of two bench recordings side by side.
func PrintFioDiffs(w io.Writer, ds []FioDiff) {
	fmt.Fprintf(w, "\nfio reference (fio's figures; blk: dbiolat's block latency of fio's requests):\n")
	fmt.Fprintf(w, "%-14s %9s %9s %10s %10s %7s %10s %10s %7s\n", "fio job", "IOPS A", "IOPS B", "clat A", "clat B", "B/A", "blk A", "blk B", "B/A")
	for _, d := range ds {
		fmt.Fprintf(w, "%-14s %9.0f %9.0f %10s %10s %6.2fx %10s %10s %6.2fx\n", d.Name, d.IOPSA, d.IOPSB,
			dur(uint64(d.ClatMeanA)), dur(uint64(d.ClatMeanB)), d.ClatRatio, dur(uint64(d.BlkMeanA)), dur(uint64(d.BlkMeanB)), d.BlkRatio)
	}
}
