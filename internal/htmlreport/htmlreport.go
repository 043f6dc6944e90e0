// Package htmlreport writes a recording's report, and the comparison of
// two recordings, as one self-contained HTML file: inline CSS, plots as
// inline SVG whose geometry is computed here, no script, nothing fetched
// when the file is opened. Text from the recording (query texts above
// all) goes through html/template, which escapes it.
package htmlreport

import (
	"bytes"
	"cmp"
	"embed"
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/record"
)

//go:embed *.tmpl
var files embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"f": func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
}).ParseFS(files, "*.tmpl"))

type kv struct{ K, V string }

// plot is a chart with its title, its source and its figures.
type plot struct {
	Name, Title, Source, Stats string
	Chart                      Chart
}

func histPlot(def model.Histogram, h *hist.Hist) plot {
	return plot{Name: def.Name, Title: def.Title, Source: def.Source, Chart: HistChart("hist-"+def.Name, h, def.Unit),
		Stats: histStats(def, "", h)}
}

// histStats are a histogram's figures, after tag ("A: ") if given, in
// the page's µs.
func histStats(def model.Histogram, tag string, h *hist.Hist) string {
	if h == nil || h.Count == 0 {
		return tag + "none"
	}
	format := output.Format(def.Unit)
	return microsIn.ReplaceAllString(fmt.Sprintf("%scount %d, mean %s, p50 %s, p99 %s", tag, h.Count,
		format(uint64(h.Mean())), format(h.Quantile(0.5)), format(h.Quantile(0.99))), "${1}µs")
}

type rateRow struct {
	Layer, Role, Device                         string
	Reads, ReadBytes, Writes, WriteBytes, Other string
	Mean                                        string
}

type fpRow struct {
	output.FingerprintStats
	Mean, Total, CPU, FS, IOWait, Share string
}

type slowRow struct {
	N                      int
	Time, When, Who, Query string
	Boxes                  []string
	FS, Blk                string
	PID                    int
}

type fioRow struct {
	Name, RW, Engine, BS, Dir  string
	IODepth                    int
	IOPS, MBs                  string
	ClatMean, ClatP50, ClatP99 string
	FSMean                     string
	BlkCount, BlkMean, BlkP50  string
}

type procRow struct {
	When, Role, Elapsed, CPU, Read, Write, Sync string
	PID                                         int
}

type reportPage struct {
	File         string
	Meta         []kv
	Interrupted  bool
	Summary      string
	Hists        []plot
	Waits        []plot   // sleeps of queries by wait event
	NotTraced    []string // the layers the recording did not trace, a sentence each
	Rates        []plot
	RateRows     []rateRow
	Queries      int
	Fingerprints int
	FPs          []fpRow
	Slowest      []slowRow
	Waterfall    *Chart
	Boxes        []model.Box
	Fio          []fioRow
	Processes    []procRow
}

// Options are report's choices.
type Options struct {
	Top     int // fingerprints listed
	Slowest int // queries in the waterfall
}

// Report writes the HTML report of a recording; name is its file name.
func Report(w io.Writer, r *record.Recording, name string, o Options) error {
	p := reportPage{File: filepath.Base(name), Meta: where(r), Interrupted: r.Summary == nil, Boxes: model.Boxes}
	fps := output.ByFingerprint(r.Queries)
	p.Queries, p.Fingerprints = output.Calls(fps), len(fps)
	if r.Summary != nil {
		var b strings.Builder
		output.Summary(&b, output.Recorded(r.Summary, fps))
		p.Summary = strings.TrimSpace(b.String())
		for _, def := range model.Histograms {
			if h := r.Summary.Hists[def.Name]; h != nil && h.Count > 0 {
				p.Hists = append(p.Hists, histPlot(def, h))
			}
		}
		for _, event := range output.ByTotal(r.Summary.WaitHists) {
			p.Waits = append(p.Waits, waitPlot(event, r.Summary.WaitHists[event]))
		}
	} else if n := len(r.Intervals); n > 0 {
		p.Summary = "counters as of the last interval: " + output.DropsText(r.Intervals[n-1].Drops)
	}
	fs, blk := traced(r, "fs", "fs"), traced(r, "block", "blk")
	if !fs {
		p.NotTraced = append(p.NotTraced, "File system calls were not traced (the recording was made without --fs): "+
			"it has no file system rates or histograms, and the queries' file system times are not known.")
	}
	if !blk {
		p.NotTraced = append(p.NotTraced, "Block requests were not traced: the recording has no block device rates or histograms.")
	}
	p.Rates, p.RateRows = rates(r.Intervals, fs, blk)

	for _, f := range fps[:min(o.Top, len(fps))] {
		row := fpRow{FingerprintStats: f, Mean: dur(f.MeanNs()), Total: dur(f.TotalNs), CPU: dur(f.CPUNs),
			FS: dur(f.FSNs), IOWait: dur(f.IOWaitNs), Share: fmt.Sprintf("%.0f%%", 100*f.IOShare())}
		if !fs {
			row.FS = "not traced"
		}
		p.FPs = append(p.FPs, row)
	}
	if slow := output.Slowest(r.Queries, o.Slowest); len(slow) > 0 {
		c := WaterfallChart(slow)
		p.Waterfall = &c
		for i := range slow {
			q := &slow[i]
			row := slowRow{N: i + 1, Time: dur(q.QueryNs), When: q.TS.Format("15:04:05.000"), PID: q.PID, Query: q.Query,
				Who: strings.TrimSpace(output.Who(q) + " " + output.Application(q)),
				FS:  fmt.Sprintf("%s in %d calls (%s), %d missed the page cache", dur(q.FSNs()), q.FSCount(), hist.FormatBytes(q.FSReadBytes+q.FSWriteBytes), q.FSReadMissCount),
				Blk: fmt.Sprintf("%s busy, %d requests (%s)", dur(q.BlkNs), q.BlkCount, hist.FormatBytes(q.BlkBytes))}
			if !fs {
				row.FS = "not traced"
			}
			if !blk {
				row.Blk = "not traced"
			}
			for _, v := range boxValues(q) {
				row.Boxes = append(row.Boxes, dur(v))
			}
			p.Slowest = append(p.Slowest, row)
		}
	}
	p.Fio = fioRows(r.Fio)
	for _, pr := range output.BackgroundRuns(r.Processes) {
		p.Processes = append(p.Processes, procRow{When: pr.TS.Format("15:04:05.000"), Role: pr.Role, PID: pr.PID,
			Elapsed: dur(pr.ElapsedNs), CPU: fmt.Sprintf("%s (user %s, sys %s)", dur(pr.CPUNs), dur(pr.CPUUserNs), dur(pr.CPUSysNs)),
			Read:  fmt.Sprintf("%s, %d calls, %s", dur(pr.FSReadNs), pr.FSReadCount, hist.FormatBytes(pr.FSReadBytes)),
			Write: fmt.Sprintf("%s, %d calls, %s", dur(pr.FSWriteNs), pr.FSWriteCount, hist.FormatBytes(pr.FSWriteBytes)),
			Sync:  fmt.Sprintf("%s, %d calls", dur(pr.FSSyncNs), pr.FSSyncCount)})
	}
	if err := r.Err(); err != nil {
		return err
	}
	return execute(w, "report", p)
}

// traced says whether a recording traced a probe family (model.Summary's
// Traced). An interrupted recording has no summary to say it: a layer
// counts as traced when its intervals have rows of it ("fs", "blk"), as do
// recordings made before summaries listed their families.
func traced(r *record.Recording, family, layer string) bool {
	if r.Summary != nil && len(r.Summary.Traced) > 0 {
		return slices.Contains(r.Summary.Traced, family)
	}
	for _, iv := range r.Intervals {
		if slices.ContainsFunc(iv.Rates, func(x model.Rate) bool { return x.Layer == layer }) {
			return true
		}
	}
	return r.Summary != nil // an old complete recording: as before, drawn
}

// waitPlot is the histogram of the sleeps of queries on one wait event,
// with the figures the terminal prints for it (output.WaitHists).
func waitPlot(event string, h *hist.Hist) plot {
	def := model.Histogram{Name: "wait-" + event, Unit: hist.Time}
	return plot{Name: htmlID.ReplaceAllString(def.Name, "_"), Title: "sleeps of queries on wait event " + event,
		Source: "Each sleep of a query's process or thread under this wait, timed by sched_switch: PostgreSQL's wait event, which the backend published (read from its memory at the switch-out); MySQL's and MariaDB's thd_wait_begin type.",
		Chart:  HistChart(def.Name, h, hist.Time), Stats: fmt.Sprintf("total %s, ", dur(h.Sum)) + histStats(def, "", h)}
}

// htmlID is what an element's id may not hold (a wait event's name may
// have spaces: "LWLock/extension tranche 75").
var htmlID = regexp.MustCompile(`[^A-Za-z0-9_/.-]`)

// execute renders into memory first: a failed template leaves no half file.
func execute(w io.Writer, name string, data any) error {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// where lists the facts about the machine and the database the recording
// keeps in its meta table, always the same keys (a value may be empty).
func where(r *record.Recording) []kv {
	m := r.Meta
	mem := m["memory_bytes"]
	if n, err := strconv.ParseUint(mem, 10, 64); err == nil {
		mem = hist.FormatBytes(n)
	}
	started := m["started"]
	if t, err := time.Parse(time.RFC3339Nano, started); err == nil {
		started = t.Format("2006-01-02 15:04:05 MST")
	}
	return []kv{
		{"host", m["hostname"]}, {"kernel", m["kernel"]}, {"CPUs", m["cpus"]}, {"memory", mem},
		{"server", cmp.Or(m["server"], "PostgreSQL "+m["postgres_version"])}, {"data directory", m["data_dir"]},
		{"device", m["device"]}, {"file system", strings.TrimSpace(m["fs_type"] + " at " + m["mount_point"])},
		{"mount options", m["mount_options"]}, {"started", started}, {"duration", duration(r)},
		{"bench directory", m["bench_dir"]},
	}
}

func duration(r *record.Recording) string {
	if r.Summary != nil {
		return fmt.Sprintf("%.1fs", r.Summary.Seconds)
	}
	var s float64
	for _, iv := range r.Intervals {
		s += iv.Seconds
	}
	return fmt.Sprintf("%.1fs until it was interrupted", s)
}

// isOurs says whether a block rate row is PostgreSQL's own I/O.
func isOurs(r *model.Rate) bool { return r.Role != "kernel" && r.Role != "other process" }

// rates draws the per-interval rates and sums them per layer, role and
// device over the whole recording. Only the layers traced are drawn: an
// untraced one would be an empty plot, which reads as "no I/O".
func rates(ivs []model.Interval, fs, blk bool) ([]plot, []rateRow) {
	if len(ivs) == 0 {
		return nil, nil
	}
	const mib = 1 << 20
	type key struct{ layer, role, dev string }
	type sum struct{ reads, rbytes, writes, wbytes, other, ns, ops float64 }
	sums := map[key]*sum{}
	n := len(ivs)
	fsR, fsW, fsS, fsRB, fsWB := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	bR, bW, bO, bX, bRB, bWB, bXB := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, iv := range ivs {
		for _, r := range iv.Rates {
			k := key{r.Layer, r.Role, r.Device}
			s := sums[k]
			if s == nil {
				s = &sum{}
				sums[k] = s
			}
			ops := (r.ReadOps + r.WriteOps + r.SyncOps + r.OtherOps) * iv.Seconds
			s.reads += r.ReadOps * iv.Seconds
			s.rbytes += r.ReadBytes * iv.Seconds
			s.writes += r.WriteOps * iv.Seconds
			s.wbytes += r.WriteBytes * iv.Seconds
			s.other += (r.SyncOps + r.OtherOps) * iv.Seconds
			s.ns += r.AvgNs * ops
			s.ops += ops
			switch {
			case r.Layer == "fs":
				fsR[i] += r.ReadOps
				fsW[i] += r.WriteOps
				fsS[i] += r.SyncOps
				fsRB[i] += r.ReadBytes / mib
				fsWB[i] += r.WriteBytes / mib
			case isOurs(&r):
				bR[i] += r.ReadOps
				bW[i] += r.WriteOps
				bO[i] += r.OtherOps
				bRB[i] += r.ReadBytes / mib
				bWB[i] += r.WriteBytes / mib
			default:
				bX[i] += r.ReadOps + r.WriteOps + r.OtherOps
				bXB[i] += (r.ReadBytes + r.WriteBytes) / mib
			}
		}
	}
	others := "kernel threads and other processes"
	var plots []plot
	if fs {
		plots = append(plots, plot{Name: "fs-ops", Title: "file system operations per second",
			Source: "read, write and sync syscalls of the traced PostgreSQL processes per interval, from the syscall tracepoints",
			Chart:  RateChart("rate-fs-ops", "ops/s", ivs, []Series{{"read", ColorRead, false, fsR}, {"write", ColorWrite, false, fsW}, {"sync", ColorSync, false, fsS}})},
			plot{Name: "fs-bytes", Title: "file system throughput",
				Source: "bytes read and written by those syscalls, in MiB per second (reads served by the page cache included)",
				Chart:  RateChart("rate-fs-bytes", "MiB/s", ivs, []Series{{"read", ColorRead, false, fsRB}, {"write", ColorWrite, false, fsWB}})})
	}
	if blk {
		plots = append(plots, plot{Name: "blk-ops", Title: "block requests per second",
			Source: "requests completed per interval (block_io_start to block_io_done): those PostgreSQL's processes submitted, and, dashed, all others (" + others + ", on every device)",
			Chart: RateChart("rate-blk-ops", "requests/s", ivs, []Series{{"read", ColorRead, false, bR}, {"write", ColorWrite, false, bW},
				{"flush/discard", ColorSync, false, bO}, {"not PostgreSQL", ColorOthers, true, bX}})},
			plot{Name: "blk-bytes", Title: "block throughput",
				Source: "bytes of those requests, in MiB per second; dashed: " + others,
				Chart: RateChart("rate-blk-bytes", "MiB/s", ivs, []Series{{"read", ColorRead, false, bRB}, {"write", ColorWrite, false, bWB},
					{"not PostgreSQL", ColorOthers, true, bXB}})})
	}
	keys := make([]key, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.layer != b.layer {
			return a.layer > b.layer // fs above blk: down the stack
		}
		if a.dev != b.dev {
			return a.dev < b.dev
		}
		return a.role < b.role
	})
	var rows []rateRow
	for _, k := range keys {
		s := sums[k]
		dev := k.dev
		if dev == "" {
			dev = "-"
		}
		rows = append(rows, rateRow{Layer: k.layer, Role: k.role, Device: dev,
			Reads: fmt.Sprintf("%.0f", s.reads), ReadBytes: hist.FormatBytes(uint64(s.rbytes)),
			Writes: fmt.Sprintf("%.0f", s.writes), WriteBytes: hist.FormatBytes(uint64(s.wbytes)),
			Other: fmt.Sprintf("%.0f", s.other), Mean: dur(uint64(s.ns / max(s.ops, 1)))})
	}
	return plots, rows
}

// fioRows sets each fio run beside what dbiolat saw of fio's process, as
// the terminal's table does (output.CheckFio).
func fioRows(jobs []model.FioJob) []fioRow {
	var rows []fioRow
	for i := range jobs {
		j := &jobs[i]
		c := output.CheckFio(j)
		r := fioRow{Name: j.Name, RW: j.RW, Engine: j.Engine, BS: hist.FormatBytes(uint64(j.BlockSize)), IODepth: j.IODepth, Dir: c.Op,
			IOPS: fmt.Sprintf("%.0f", c.Side.IOPS), MBs: fmt.Sprintf("%.1f", c.Side.BWBytes/1e6),
			ClatMean: dur(uint64(c.Side.ClatMeanNs)), ClatP50: dur(c.Side.ClatP50Ns), ClatP99: dur(c.Side.ClatP99Ns),
			FSMean: "-", BlkCount: "0", BlkMean: "-", BlkP50: "-"}
		if c.FS != nil && c.FS.Count > 0 {
			r.FSMean = dur(uint64(c.FS.Mean()))
		}
		if c.Blk != nil && c.Blk.Count > 0 {
			r.BlkCount = strconv.FormatUint(c.Blk.Count, 10)
			r.BlkMean, r.BlkP50 = dur(uint64(c.Blk.Mean())), dur(c.Blk.Quantile(0.5))
		}
		rows = append(rows, r)
	}
	return rows
}

// microsIn finds durations in microseconds in a sentence: "12.3us".
var microsIn = regexp.MustCompile(`([0-9])us\b`)

// Side is one recording of a comparison, and the name it goes by.
type Side struct {
	Name string
	Rec  *record.Recording
}

type deltaRow struct {
	output.QueryDelta
	MeanA, MeanB, Ratio, IOWaitA, IOWaitB, Change string
	Bars                                          Chart // its mean call in A and B, box by box
}

// stepRow is one step of the verdict's chain, formatted as compare's
// terminal output formats it (output.Step.Figures).
type stepRow struct {
	What, Layer, A, B, Change, Ratio, Share, Note string
}

func chainRows(steps []output.Step) []stepRow {
	var rows []stepRow
	for _, s := range steps {
		a, b, change, share := s.Figures()
		ratio := "–" // no ratio to nothing
		if s.A > 0 {
			ratio = fmt.Sprintf("%.2f×", s.Ratio)
		}
		rows = append(rows, stepRow{What: s.What, Layer: s.Layer, A: micro(a), B: micro(b), Change: micro(change), Ratio: ratio, Share: share,
			Note: microsIn.ReplaceAllString(s.Note, "${1}µs")})
	}
	return rows
}

type layerRow struct {
	output.LayerDiff
	MeanA, MeanB, P50A, P50B, P99A, P99B, Ratio string
}

type comparePage struct {
	NameA, NameB string
	Meta         []struct{ K, A, B string }
	Layers       []layerRow
	Verdict      string
	Chain        []stepRow
	Plots        []plot
	Common       int
	Deltas       []deltaRow
	BoxLegend    Chart // names the colors of the deltas' bars
	Fio          []fioDiffRow
	ColorA       string
	ColorB       string
}

// fioDiffRow is one fio run of two bench recordings, formatted.
type fioDiffRow struct {
	Name, Op, IOPSA, IOPSB, ClatA, ClatB, ClatRatio, BlkA, BlkB, BlkRatio string
}

// Compare writes the HTML comparison of two recordings.
func Compare(w io.Writer, c *output.Comparison, a, b Side) error {
	for _, s := range []Side{a, b} {
		if s.Rec.Summary == nil {
			return fmt.Errorf("%s was interrupted and has no histograms: compare needs recordings that ended normally", s.Name)
		}
	}
	legend := func(tag string, s Side) string {
		return fmt.Sprintf("%s: %s (%s, %s)", tag, filepath.Base(s.Name), s.Rec.Meta["device"], s.Rec.Meta["fs_type"])
	}
	p := comparePage{NameA: legend("A", a), NameB: legend("B", b), Verdict: microsIn.ReplaceAllString(c.Verdict, "${1}µs"),
		Chain: chainRows(c.Chain), Common: c.Common, BoxLegend: BoxLegend(), ColorA: ColorA, ColorB: ColorB}
	wa, wb := where(a.Rec), where(b.Rec)
	for i := range wa {
		if wa[i].V != "" || wb[i].V != "" {
			p.Meta = append(p.Meta, struct{ K, A, B string }{wa[i].K, wa[i].V, wb[i].V})
		}
	}
	for _, l := range c.Layers {
		p.Layers = append(p.Layers, layerRow{LayerDiff: l, MeanA: dur(uint64(l.MeanA)), MeanB: dur(uint64(l.MeanB)),
			P50A: dur(l.P50A), P50B: dur(l.P50B), P99A: dur(l.P99A), P99B: dur(l.P99B), Ratio: fmt.Sprintf("%.2f×", l.MeanRatio)})
	}
	ha, hb := a.Rec.Summary.Hists, b.Rec.Summary.Hists
	for _, def := range model.Histograms {
		x, y := ha[def.Name], hb[def.Name]
		if (x == nil || x.Count == 0) && (y == nil || y.Count == 0) {
			continue
		}
		p.Plots = append(p.Plots, plot{Name: def.Name, Title: def.Title, Source: def.Source,
			Stats: histStats(def, "A: ", x) + "; " + histStats(def, "B: ", y), Chart: OverlayChart("cmp-"+def.Name, x, y, def.Unit, p.NameA, p.NameB)})
	}
	for _, d := range c.Fio {
		p.Fio = append(p.Fio, fioDiffRow{Name: d.Name, Op: d.Op, IOPSA: fmt.Sprintf("%.0f", d.IOPSA), IOPSB: fmt.Sprintf("%.0f", d.IOPSB),
			ClatA: dur(uint64(d.ClatMeanA)), ClatB: dur(uint64(d.ClatMeanB)), ClatRatio: fmt.Sprintf("%.2f×", d.ClatRatio),
			BlkA: dur(uint64(d.BlkMeanA)), BlkB: dur(uint64(d.BlkMeanB)), BlkRatio: fmt.Sprintf("%.2f×", d.BlkRatio)})
	}
	for _, d := range c.Queries {
		p.Deltas = append(p.Deltas, deltaRow{QueryDelta: d, MeanA: dur(uint64(d.MeanA)), MeanB: dur(uint64(d.MeanB)),
			Ratio: fmt.Sprintf("%.2f×", d.MeanRatio), IOWaitA: dur(uint64(d.IOWaitA)), IOWaitB: dur(uint64(d.IOWaitB)),
			Change: micro(output.FormatChange(d.TotalChange())), Bars: BoxBars(&d)})
	}
	return execute(w, "compare", p)
}
