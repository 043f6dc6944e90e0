package htmlreport

import (
	"encoding/xml"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/record"
)

const hostile = `SELECT '<script>alert(1)</script>' & "x" FROM t`

func histOf(vs ...uint64) *hist.Hist {
	var h hist.Hist
	for _, v := range vs {
		h.Add(v)
	}
	return &h
}

// sample is a recording with a bit of everything a report shows.
func sample(scale uint64) *record.Recording {
	t0 := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	r := &record.Recording{Meta: map[string]string{"kernel": "6.18.0", "cpus": "4", "memory_bytes": "8589934592",
		"device": "/dev/vda1", "fs_type": "ext4", "mount_point": "/", "mount_options": "rw,relatime",
		"postgres_version": "15", "data_dir": "/tmp/pg", "started": t0.Format(time.RFC3339Nano), "hostname": "box"}}
	var qs []model.Query
	for i := 0; i < 30; i++ {
		q := model.Query{Type: "query", Statements: 1, TS: t0.Add(time.Duration(i) * 10 * time.Millisecond), PID: 100 + i%2, Role: "client backend",
			User: "postgres", Database: "postgres", Fingerprint: "00000000000000aa", Query: "UPDATE t SET a = a + $1 WHERE id = $2",
			QueryNs: scale * uint64(1e6+i*1e4), CPUNs: scale * 6e5, IOWaitNs: scale * 3e5, RunqNs: 5e4, LockNs: 2e4, OtherWaitNs: 1e4}
		q.UnaccountedNs = q.QueryNs - q.Accounted()
		if i%3 == 0 {
			q.Fingerprint, q.Query = "00000000000000bb", hostile
		}
		qs = append(qs, q)
	}
	r.Queries = slices.Values(qs)
	r.Processes = []model.Process{{Type: "process", TS: t0, PID: 7, Role: "autovacuum worker", ElapsedNs: 5e8, CPUNs: 1e8},
		{Type: "process", TS: t0, PID: 8, Role: "client backend", ElapsedNs: 1e9}}
	for i := 1; i <= 3; i++ {
		r.Intervals = append(r.Intervals, model.Interval{Type: "interval", TS: t0.Add(time.Duration(i) * 500 * time.Millisecond), Seconds: 0.5,
			Rates: []model.Rate{{Layer: "fs", Role: "client backend", ReadOps: float64(100 * i), ReadBytes: float64(819200 * i), WriteOps: 20, SyncOps: 2, AvgNs: 4000},
				{Layer: "blk", Role: "client backend", Device: "vda", ReadOps: float64(10 * i), ReadBytes: 1 << 20, AvgNs: 2e5},
				{Layer: "blk", Role: "kernel", Device: "vda", WriteOps: 5, WriteBytes: 1 << 19, AvgNs: 1e6}}})
	}
	r.Summary = &model.Summary{Type: "summary", Seconds: 1.5, Instances: []int{42}, Queries: 31, Traced: []string{"wire", "fs", "block", "sched"},
		WaitHists: model.Hists{"Lock/transactionid": histOf(scale*2e4, scale*3e4), "LWLock/extension tranche 75": histOf(5e3), "IO/DataFileRead": {}},
		Hists: model.Hists{
			"query":         histOf(scale*1e6, scale*2e6, scale*3e6),
			"fs_read":       histOf(scale*2e3, scale*3e3, scale*3e3, scale*4e3, scale*70e3, scale*150e3),
			"blk_read":      histOf(scale*100e3, scale*200e3),
			"blk_read_size": histOf(8192, 131072),
			"lock":          {}, // empty: not drawn
		}}
	r.Fio = []model.FioJob{{Type: "fio", Name: "randread", RW: "randread", Engine: "psync", BlockSize: 8192, IODepth: 1, Seconds: 5,
		Read:  model.FioSide{Ops: 1000, IOPS: 200, BWBytes: 1638400, ClatMeanNs: 150e3, ClatP50Ns: 140e3, ClatP99Ns: 400e3},
		Hists: model.Hists{"blk_read": histOf(140e3, 150e3), "fs_read": histOf(152e3, 154e3)}}}
	return r
}

// page is what a test reads of a rendered page: it must be well-formed
// (every element closed), and these are its plots and table rows.
type page struct {
	plots []string            // data-plot of every svg.plot
	rows  map[string][]string // the text of each tr, by class
	text  string
}

func parse(t *testing.T, html string) page {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(html))
	d.Strict, d.Entity = true, xml.HTMLEntity
	p := page{rows: map[string][]string{}}
	var rowClass string
	var row strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the page is not well-formed: %v", err)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range x.Attr {
				attr[a.Name.Local] = a.Value
			}
			if x.Name.Local == "svg" && attr["class"] == "plot" {
				p.plots = append(p.plots, attr["data-plot"])
			}
			if x.Name.Local == "tr" {
				rowClass = attr["class"]
				row.Reset()
			}
		case xml.EndElement:
			if x.Name.Local == "tr" && rowClass != "" {
				p.rows[rowClass] = append(p.rows[rowClass], row.String())
				rowClass = ""
			}
		case xml.CharData:
			row.Write(x)
			p.text += string(x)
		}
	}
	return p
}

// network finds anything a browser would fetch.
var network = regexp.MustCompile(`(?i)(src|href|xlink:href|action)\s*=\s*["']?\s*[a-z]*:?//|url\(|@import|<script|<link|<img|<iframe`)

func render(t *testing.T, f func(w io.Writer) error) string {
	t.Helper()
	var b strings.Builder
	if err := f(&b); err != nil {
		t.Fatal(err)
	}
	if m := network.FindString(b.String()); m != "" {
		t.Errorf("the page refers to something to fetch or run: %q", m)
	}
	if strings.Contains(b.String(), "<script>alert") {
		t.Error("a query text went into the page unescaped")
	}
	return b.String()
}

func TestReport(t *testing.T) {
	r := sample(1)
	html := render(t, func(w io.Writer) error { return Report(w, r, "/tmp/run.dbiolat", Options{Top: 10, Slowest: 5}) })
	p := parse(t, html)
	want := []string{"hist-query", "hist-fs_read", "hist-blk_read", "hist-blk_read_size",
		"wait-Lock/transactionid", "wait-LWLock/extension tranche 75", // the most time first; an empty one not drawn
		"rate-fs-ops", "rate-fs-bytes", "rate-blk-ops", "rate-blk-bytes", "waterfall"}
	if !slices.Equal(p.plots, want) {
		t.Errorf("plots %q, want %q", p.plots, want)
	}
	if fp := p.rows["fp"]; len(fp) != 2 || !strings.Contains(fp[0], "UPDATE t SET") || !strings.Contains(fp[1], hostile) {
		t.Errorf("fingerprint rows %q", fp)
	}
	if n := len(p.rows["slow"]); n != 5 {
		t.Errorf("%d slowest queries shown, want 5", n)
	}
	if pr := p.rows["proc"]; len(pr) != 1 || !strings.Contains(pr[0], "autovacuum worker") {
		t.Errorf("process rows %q, want the autovacuum worker alone", pr)
	}
	if f := p.rows["fio"]; len(f) != 1 || !strings.Contains(f[0], "randread") || !strings.Contains(f[0], "1.6") ||
		!strings.Contains(f[0], "153µs") || !strings.Contains(f[0], "145µs") || !strings.Contains(f[0], "psync") {
		t.Errorf("fio rows %q", f)
	}
	if n := len(p.rows["rate"]); n != 3 {
		t.Errorf("%d rate rows, want 3 (fs, blk backend, blk kernel)", n)
	}
	// The summary saw 31 queries; the recording holds 30, and its summary
	// (as recordings before record counted them) says 0 were reported.
	for _, s := range []string{"6.18.0", "/dev/vda1", "ext4", "rw,relatime", "8.0GiB", "nothing dropped", "fio's own JSON output",
		"block_io_start", "sys_enter_", "query__start", "count 6, mean", "2µs–4µs", "8KiB–16KiB", "1.5s",
		"31 queries, 30 reported", "30 queries recorded",
		"sleeps of queries on wait event Lock/transactionid", "total 50µs, count 2, mean 25µs", "count 1, mean 5µs"} {
		if !strings.Contains(p.text, s) {
			t.Errorf("the page does not say %q", s)
		}
	}
	if strings.Contains(p.text, "bench directory") {
		t.Error("a fact the recording does not have is listed")
	}
	if strings.Contains(p.text, "interrupted") {
		t.Error("a complete recording is called interrupted")
	}
	if strings.Contains(p.text, "not traced") {
		t.Error("a layer traced is said not traced")
	}
	if !strings.Contains(html, `id="plot-wait-LWLock/extension_tranche_75"`) {
		t.Error("a wait event's plot has no id an element may have")
	}

	// Without --fs: the file system's plots are not drawn, the page says
	// why, and so do the queries' file system figures.
	r.Summary.Traced = []string{"wire", "block", "sched"}
	p = parse(t, render(t, func(w io.Writer) error { return Report(w, r, "x", Options{Top: 10, Slowest: 5}) }))
	noFS := slices.DeleteFunc(slices.Clone(want), func(s string) bool { return strings.HasPrefix(s, "rate-fs-") })
	if !slices.Equal(p.plots, noFS) {
		t.Errorf("without --fs: plots %q, want %q", p.plots, noFS)
	}
	if n := strings.Count(p.text, "File system calls were not traced (the recording was made without --fs)"); n != 2 {
		t.Errorf("without --fs: the page says %d times that file system calls were not traced, want 2 (histograms, rates)", n)
	}
	for _, class := range []string{"slow", "fp"} {
		for _, row := range p.rows[class] {
			if !strings.Contains(row, "not traced") {
				t.Errorf("without --fs, a %s row gives file system figures: %q", class, row)
			}
		}
	}
	r.Summary.Traced = []string{"wire", "fs", "block", "sched"}

	// Interrupted: no summary, so no histograms, and the page says so.
	r.Summary, r.Fio = nil, nil
	p = parse(t, render(t, func(w io.Writer) error { return Report(w, r, "x", Options{Top: 1, Slowest: 1}) }))
	if !slices.Equal(p.plots, want[6:]) || !strings.Contains(p.text, "was interrupted") || len(p.rows["fp"]) != 1 {
		t.Errorf("interrupted: plots %q, fingerprints %d", p.plots, len(p.rows["fp"]))
	}
	// Interrupted without --fs: no summary says so, the intervals do.
	for i := range r.Intervals {
		r.Intervals[i].Rates = slices.DeleteFunc(r.Intervals[i].Rates, func(x model.Rate) bool { return x.Layer == "fs" })
	}
	p = parse(t, render(t, func(w io.Writer) error { return Report(w, r, "x", Options{Top: 1, Slowest: 1}) }))
	if !slices.Equal(p.plots, noFS[6:]) || !strings.Contains(p.text, "File system calls were not traced") {
		t.Errorf("interrupted without --fs: plots %q", p.plots)
	}
}

func TestCompare(t *testing.T) {
	a, b := sample(1), sample(3)
	c := output.Compare(a.Summary.Hists, b.Summary.Hists)
	c.Queries, c.Common = output.QueryDeltas(a.Queries, b.Queries, 10)
	html := render(t, func(w io.Writer) error {
		return Compare(w, c, Side{Name: "/x/plain.dbiolat", Rec: a}, Side{Name: "/x/slow.dbiolat", Rec: b})
	})
	p := parse(t, html)
	want := []string{"cmp-query", "cmp-fs_read", "cmp-blk_read", "cmp-blk_read_size",
		"boxes-legend", "boxes-00000000000000aa", "boxes-00000000000000bb"}
	if !slices.Equal(p.plots, want) {
		t.Errorf("plots %q, want %q", p.plots, want)
	}
	// A fingerprint's bars: one for A and one for B, on one row with its
	// text (escaped: the page parsed and render found no raw script).
	wf := p.rows["waterfall"]
	if len(wf) != 2 || !strings.Contains(wf[0], "UPDATE t SET") || !strings.Contains(wf[1], hostile) {
		t.Errorf("waterfall rows %q", wf)
	}
	if na, nb := strings.Count(html, `class="bar-a"`), strings.Count(html, `class="bar-b"`); na != 2 || nb != 2 {
		t.Errorf("%d bars of A and %d of B, want 2 each", na, nb)
	}
	// B's CPU is three times A's: each box's time per call, as the sample made it.
	for _, s := range []string{"A cpu: 600µs per call", "B cpu: 1.8ms per call", "A lock: 20µs per call", "B lock: 20µs per call"} {
		if !strings.Contains(p.text, s) {
			t.Errorf("no segment says %q", s)
		}
	}
	if len(p.rows["step"]) != 0 {
		t.Errorf("a chain table without a chain: %q", p.rows["step"])
	}
	if d := p.rows["delta"]; len(d) != 2 || !strings.Contains(d[0], "UPDATE t SET") || !strings.Contains(d[0], "3.00×") {
		t.Errorf("delta rows %q", d)
	}
	if n := len(p.rows["layer"]); n != 3 {
		t.Errorf("%d layer rows, want 3", n)
	}
	for _, s := range []string{"A: plain.dbiolat (/dev/vda1, ext4)", "B: slow.dbiolat", "file system reads 3.00x (mean 38.7µs → 116µs) and block device reads 3.00x (mean 150µs → 450µs)"} {
		if !strings.Contains(p.text, s) {
			t.Errorf("the page does not say %q", s)
		}
	}

	// With the chain: one row per step, under the verdict.
	c.Chain, c.Verdict = output.Chain(a.Queries, b.Queries, a.Meta, b.Meta)
	p = parse(t, render(t, func(w io.Writer) error {
		return Compare(w, c, Side{Name: "/x/plain.dbiolat", Rec: a}, Side{Name: "/x/slow.dbiolat", Rec: b})
	}))
	steps := p.rows["step"]
	if len(c.Chain) == 0 || len(steps) != len(c.Chain) {
		t.Fatalf("%d chain rows for %d steps", len(steps), len(c.Chain))
	}
	for i, s := range c.Chain {
		a, b, _, _ := s.Figures()
		if !strings.Contains(steps[i], s.What) || !strings.Contains(steps[i], micro(a)) || !strings.Contains(steps[i], micro(b)) {
			t.Errorf("step %d is %q: want %s, %s and %s", i, steps[i], s.What, a, b)
		}
	}
	if !strings.Contains(p.text, microsIn.ReplaceAllString(c.Verdict, "${1}µs")) {
		t.Errorf("the page does not give the chain's verdict %q", c.Verdict)
	}
}

func TestAxis(t *testing.T) {
	for _, c := range []struct {
		v         float64
		counts    bool
		top, step float64
	}{{0, false, 1, 0.25}, {1, true, 1, 1}, {3, true, 3, 1}, {7, false, 8, 2}, {2.2, false, 3, 1}, {10, true, 10, 5},
		{999, true, 1000, 250}, {1001, true, 1500, 500}, {0.03, false, 0.03, 0.01}, {37, false, 40, 10}} {
		if top, step := axis(c.v, c.counts); math.Abs(top-c.top) > 1e-9 || math.Abs(step-c.step) > 1e-9 {
			t.Errorf("axis(%v, %v) = %v, %v; want %v, %v", c.v, c.counts, top, step, c.top, c.step)
		}
	}
}

func TestNumber(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.25: "0.25", 0.1 * 3: "0.3", 750: "750", 2500: "2500", 12500: "12.5k", 1.5e6: "1.5M", 2e9: "2G"} {
		if got := number(v); got != want {
			t.Errorf("number(%v) = %q, want %q", v, got, want)
		}
	}
}

// The histogram's bars are as long as their counts, on the same scale.
func TestHistChartBars(t *testing.T) {
	h := histOf(3e3, 3e3, 3e3, 3e3, 100e3, 100e3) // 4 in 2µs–4µs, 2 in 64µs–128µs
	c := HistChart("x", h, hist.Time)
	var bars []Rect
	for _, r := range c.Rects {
		if r.Fill == ColorHist {
			bars = append(bars, r)
		}
	}
	if len(bars) != 2 || bars[0].W != 2*bars[1].W || bars[0].W != histBarW {
		t.Errorf("bars %+v: want two, of the whole width and half of it", bars)
	}
	var labels []string
	for _, x := range c.Texts {
		if strings.Contains(x.S, "–") {
			labels = append(labels, x.S)
		}
	}
	if len(labels) != 6 || labels[0] != "2µs–4µs" || labels[5] != "64µs–128µs" {
		t.Errorf("bucket labels %q", labels)
	}
}

// Empty or missing histograms draw an empty frame, never panic.
func TestEmptyCharts(t *testing.T) {
	if c := HistChart("x", &hist.Hist{}, hist.Time); len(c.Rects) != 0 {
		t.Errorf("bars in an empty histogram: %+v", c.Rects)
	}
	if c := OverlayChart("x", nil, histOf(5), hist.Time, "A", "B"); len(c.Rects) != 3 { // 2 swatches and B's bar
		t.Errorf("overlay of nothing and one value: %+v", c.Rects)
	}
	if c := RateChart("x", "ops/s", nil, nil); len(c.Paths) != 0 {
		t.Errorf("lines without intervals: %+v", c.Paths)
	}
}

// The chain's table: each step's figures as the terminal shows them, but
// µs and ×; a step from nothing has no ratio.
func TestChainRows(t *testing.T) {
	rows := chainRows([]output.Step{
		{Name: "query_ns", Layer: "query", What: "query time", A: 1e6, B: 3e6, Ratio: 3, Share: 1, Note: "2 fingerprints in both; 30 queries in B"},
		{Name: "io_wait_ns", Layer: "waterfall", What: "I/O wait", A: 0, B: 1.5e3, Share: 0.00075},
		// A box that grew by three times the queries' change (another fell).
		{Name: "blk_ns", Layer: "block device", What: "block requests in flight", A: 1e6, B: 7.02e6, Ratio: 7.02, Share: 3.01},
		{Name: "fs_read_miss_ratio", Layer: "page cache", What: "reads that missed", A: 0.25, B: 0.5, Ratio: 2, Note: "4.0 → 4.0 reads per query"},
	})
	want := []stepRow{
		{What: "query time", Layer: "query", A: "1ms", B: "3ms", Change: "+2ms", Ratio: "3.00×", Share: "100%", Note: "2 fingerprints in both; 30 queries in B"},
		{What: "I/O wait", Layer: "waterfall", A: "0ns", B: "1.5µs", Change: "+1.5µs", Ratio: "–", Share: "0%"},
		{What: "block requests in flight", Layer: "block device", A: "1ms", B: "7.02ms", Change: "+6.02ms", Ratio: "7.02×", Share: "more than all"},
		{What: "reads that missed", Layer: "page cache", A: "25.0%", B: "50.0%", Ratio: "2.00×", Note: "4.0 → 4.0 reads per query"},
	}
	if !slices.Equal(rows, want) {
		t.Errorf("chain rows\n got  %+v\n want %+v", rows, want)
	}
}

// A fingerprint's bars: each segment as long as its box's time per call,
// A's and B's on one scale (the slower mean fills the width), A above B.
func TestBoxBars(t *testing.T) {
	d := output.QueryDelta{Fingerprint: "f", MeanA: 1500, MeanB: 3000,
		BoxesA: map[string]float64{"cpu_ns": 1000, "io_wait_ns": 500},
		BoxesB: map[string]float64{"cpu_ns": 1000, "io_wait_ns": 2000}}
	c := BoxBars(&d)
	if c.ID != "boxes-f" {
		t.Errorf("id %q", c.ID)
	}
	color := map[string]string{}
	for _, b := range model.Boxes {
		color[b.Name] = b.Color
	}
	type seg struct {
		fill string
		w    float64
	}
	var segs []seg
	outline := map[string]Rect{}
	for _, r := range c.Rects {
		if r.Class != "" {
			outline[r.Class] = r
		} else {
			segs = append(segs, seg{r.Fill, r.W})
		}
	}
	px := boxBarsW / 3000 // B's mean fills the width
	want := []seg{{color["cpu_ns"], 1000 * px}, {color["io_wait_ns"], 500 * px}, {color["cpu_ns"], 1000 * px}, {color["io_wait_ns"], 2000 * px}}
	if len(segs) != len(want) {
		t.Fatalf("segments %+v, want %+v", segs, want)
	}
	for i := range want {
		if segs[i].fill != want[i].fill || math.Abs(segs[i].w-want[i].w) > 1e-9 {
			t.Errorf("segment %d: %+v, want %+v", i, segs[i], want[i])
		}
	}
	a, b := outline["bar-a"], outline["bar-b"]
	if len(outline) != 2 || math.Abs(a.W-1500*px) > 1e-9 || math.Abs(b.W-boxBarsW) > 1e-9 || a.Y >= b.Y {
		t.Errorf("bars %+v: want A half of B's length, above it", outline)
	}
	if !strings.Contains(c.Rects[1].Tip, "A io wait: 500ns per call (33%)") {
		t.Errorf("A's I/O wait says %q", c.Rects[1].Tip)
	}

	// Boxes that overrun the mean set the scale: no bar leaves its room.
	d.BoxesB["cpu_ns"] = 4000 // 6000 in B's boxes, for a mean of 3000
	for _, r := range BoxBars(&d).Rects {
		if r.X+r.W > boxBarsLabelW+boxBarsW+1e-9 {
			t.Errorf("%+v overflows the bar's width", r)
		}
	}
}

// A box that grew by more than the queries did (another box fell) has no
// share above 100% in the chain's table: it says so in words, beside its
// change in time per query.
func TestCompareSharesWithinTheWhole(t *testing.T) {
	a, b := sample(1), sample(1)
	var qs []model.Query
	for q := range b.Queries {
		q.IOWaitNs += 3e6 // +3ms asleep for I/O
		q.CPUNs -= 5e5    // -0.5ms on CPU
		q.QueryNs += 25e5 // so +2.5ms in all: I/O wait is 120% of it
		qs = append(qs, q)
	}
	b.Queries = slices.Values(qs)
	c := output.Compare(a.Summary.Hists, b.Summary.Hists)
	c.Queries, c.Common = output.QueryDeltas(a.Queries, b.Queries, 10)
	c.Chain, c.Verdict = output.Chain(a.Queries, b.Queries, a.Meta, b.Meta)
	p := parse(t, render(t, func(w io.Writer) error {
		return Compare(w, c, Side{Name: "a", Rec: a}, Side{Name: "b", Rec: b})
	}))
	steps := p.rows["step"]
	if len(steps) != len(c.Chain) || !slices.ContainsFunc(steps, func(r string) bool {
		return strings.HasPrefix(r, "I/O wait") && strings.Contains(r, "+3ms") && strings.HasSuffix(r, "more than all")
	}) {
		t.Errorf("chain rows %q: want I/O wait's, +3ms per query, more than all of the change", steps)
	}
	share := regexp.MustCompile(`×(-?[0-9]+)%`) // the share follows the ratio
	for _, r := range steps {
		if m := share.FindStringSubmatch(r); m != nil {
			if n, _ := strconv.Atoi(m[1]); n > 100 || n < -100 {
				t.Errorf("a share beyond the whole: %q", r)
			}
		}
	}
	if !strings.Contains(p.text, `not a percentage above 100% but "more than all"`) {
		t.Error("the page does not explain the shares")
	}
}
