package htmlreport

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
)

// The plots' colors. They are distinctive on purpose: the tests find them
// in a screenshot to check that the plots were drawn.
const (
	ColorHist   = "#3a6fb0" // histogram bars
	ColorRead   = "#1b9e77" // rate lines
	ColorWrite  = "#d95f02"
	ColorSync   = "#7570b3"
	ColorOthers = "#8c8c8c" // I/O that is not PostgreSQL's
	ColorA      = "#2c7fb8" // compare: recording A
	ColorB      = "#f03b20" // compare: recording B
)

// Box is a legend's entry: a name and its color.
type Box struct{ Name, Color string }

// waterfallLegend is the waterfall's boxes as the legend shows them.
func waterfallLegend() []Box {
	var out []Box
	for _, b := range model.Boxes {
		out = append(out, Box{b.Short, b.Color})
	}
	return out
}

// boxValues are a query's waterfall boxes, in the catalog's order.
func boxValues(q *model.Query) []uint64 {
	var out []uint64
	for _, b := range model.Boxes {
		out = append(out, *b.Of(q))
	}
	return out
}

// Chart is one SVG plot, its geometry computed here; the template only
// writes the elements out.
type Chart struct {
	ID    string // data-plot: what the plot shows, for readers and tests
	W, H  int
	Label string // aria-label
	Lines []Line
	Rects []Rect
	Paths []Path
	Texts []Text
}

// Line is an axis (Class "axis") or grid line ("grid").
type Line struct {
	X1, Y1, X2, Y2 float64
	Class          string
}

// Rect is a bar or a legend swatch; Tip shows on hover. Class, if any,
// styles it and lets readers and tests find it.
type Rect struct {
	X, Y, W, H       float64
	Fill, Tip, Class string
}

// Path is a series of a line chart.
type Path struct {
	D, Stroke string
	Dash      bool
}

// Text is a label. Rotate turns it (degrees) around its anchor point.
type Text struct {
	X, Y   float64
	Anchor string
	Rotate float64
	S      string
}

func (c *Chart) text(x, y float64, anchor, s string) {
	c.Texts = append(c.Texts, Text{X: x, Y: y, Anchor: anchor, S: s})
}

func (c *Chart) legend(x, y float64, items []Box, dashed map[string]bool) {
	for _, it := range items {
		if dashed[it.Name] {
			c.Paths = append(c.Paths, Path{D: fmt.Sprintf("M%.1f %.1fH%.1f", x, y-4, x+14), Stroke: it.Color, Dash: true})
		} else {
			c.Rects = append(c.Rects, Rect{X: x, Y: y - 9, W: 12, H: 10, Fill: it.Color})
		}
		c.text(x+17, y, "start", it.Name)
		x += 17 + 6.5*float64(len([]rune(it.Name))) + 16
	}
}

// axis chooses the scale of an axis holding values up to v: a step of 1,
// 2, 2.5 or 5 times a power of ten (a whole number for counts) giving at
// most 5 ticks, and the top, the first tick at or above v.
func axis(v float64, counts bool) (top, step float64) {
	if !(v > 0) {
		v = 1
	}
	raw := v / 4
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * p
	for _, m := range []float64{1, 2, 2.5, 5} {
		if counts && m*p == 2.5 {
			continue
		}
		if m*p >= raw*(1-1e-9) {
			step = m * p
			break
		}
	}
	if counts {
		step = max(step, 1)
	}
	return step * math.Ceil(v/step*(1-1e-9)), step
}

// number formats an axis value: "0", "0.25", "750", "2500", "12.5k", "1.5M".
func number(v float64) string {
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) } // 6 digits: no float noise
	switch {
	case v >= 1e9:
		return g(v/1e9) + "G"
	case v >= 1e6:
		return g(v/1e6) + "M"
	case v >= 1e4:
		return g(v/1e3) + "k"
	}
	return g(v)
}

// dur is hist.FormatDuration with the micro sign.
func dur(ns uint64) string { return micro(hist.FormatDuration(ns)) }

func micro(s string) string {
	if strings.HasSuffix(s, "us") {
		return strings.TrimSuffix(s, "us") + "µs"
	}
	return s
}

// bucketLabel names slot i: "64µs–128µs", "4KiB–8KiB".
func bucketLabel(i int, unit hist.Unit) string {
	lo, hi := hist.SlotLabel(i, unit)
	if unit == hist.Time {
		lo, hi = micro(lo), micro(hi)
	}
	return lo + "–" + hi
}

// span returns the first and last non-empty slots of the histograms (0
// and -1, no slot, when all are empty).
func span(hs ...*hist.Hist) (first, last int) {
	first, last = -1, -1
	for _, h := range hs {
		if h == nil {
			continue
		}
		for i, n := range h.Buckets {
			if n == 0 {
				continue
			}
			if first < 0 || i < first {
				first = i
			}
			last = max(last, i)
		}
	}
	if first < 0 {
		return 0, -1
	}
	return first, last
}

// Histogram geometry: one row per log2 bucket, bcc's layout drawn.
const (
	histLabelW = 150.0
	histBarW   = 400.0
	histW      = histLabelW + histBarW + 80
	histRowH   = 18.0
)

// histFrame is what the bars of a histogram need of its frame: how many
// rows, and the pixels per unit of the x axis.
type histFrame struct {
	rows  int
	scale float64
}

// histAxes draws the frame of a histogram whose rows start at y = top,
// with an x axis for values up to v (counts, or percent); the chart's
// height follows from the rows.
func histAxes(c *Chart, top float64, rows int, v float64, counts bool, xTitle string, format func(float64) string) histFrame {
	xmax, step := axis(v, counts)
	bottom := top + float64(rows)*histRowH
	for t := 0.0; t <= xmax*(1+1e-9); t += step {
		x := histLabelW + histBarW*t/xmax
		c.Lines = append(c.Lines, Line{X1: x, Y1: top - 4, X2: x, Y2: bottom, Class: "grid"})
		c.text(x, bottom+14, "middle", format(t))
	}
	c.Lines = append(c.Lines, Line{X1: histLabelW, Y1: top - 4, X2: histLabelW, Y2: bottom, Class: "axis"},
		Line{X1: histLabelW, Y1: bottom, X2: histLabelW + histBarW, Y2: bottom, Class: "axis"})
	c.text(histLabelW+histBarW/2, bottom+30, "middle", xTitle)
	c.H = int(bottom + 40)
	return histFrame{rows: rows, scale: histBarW / xmax}
}

// HistChart draws one histogram: a bar per log2 bucket from the first
// non-empty one to the last, labelled with its range and count.
func HistChart(id string, h *hist.Hist, unit hist.Unit) Chart {
	c := Chart{ID: id, W: histW, Label: id + " histogram"}
	first, last := span(h)
	var most uint64
	for i := first; i <= last; i++ {
		most = max(most, h.Buckets[i])
	}
	const top = 34.0
	ylabel := "latency"
	if unit == hist.Bytes {
		ylabel = "request size"
	}
	c.text(histLabelW-8, top-12, "end", ylabel)
	c.text(histLabelW+4, top-12, "start", "operations in each bucket")
	f := histAxes(&c, top, last-first+1, float64(most), true, "count", number)
	for k := 0; k < f.rows; k++ {
		n := h.Buckets[first+k]
		y := top + float64(k)*histRowH
		label := bucketLabel(first+k, unit)
		c.text(histLabelW-8, y+13, "end", label)
		if n == 0 {
			continue
		}
		w := max(1, f.scale*float64(n))
		c.Rects = append(c.Rects, Rect{X: histLabelW, Y: y + 2, W: w, H: histRowH - 4, Fill: ColorHist,
			Tip: fmt.Sprintf("%s: %d (%.1f%%)", label, n, 100*float64(n)/float64(h.Count))})
		c.text(histLabelW+w+4, y+13, "start", strconv.FormatUint(n, 10))
	}
	return c
}

// OverlayChart draws two histograms on the same log2 buckets, as the share
// of each one's operations, so recordings of different lengths compare.
func OverlayChart(id string, a, b *hist.Hist, unit hist.Unit, nameA, nameB string) Chart {
	c := Chart{ID: id, W: histW, Label: id + " histograms of A and B"}
	first, last := span(a, b)
	share := func(h *hist.Hist, i int) float64 {
		if h == nil || h.Count == 0 {
			return 0
		}
		return 100 * float64(h.Buckets[i]) / float64(h.Count)
	}
	var most float64
	for i := first; i <= last; i++ {
		most = max(most, share(a, i), share(b, i))
	}
	const top = 52.0
	c.legend(histLabelW, 14, []Box{{nameA, ColorA}}, nil)
	c.legend(histLabelW, 32, []Box{{nameB, ColorB}}, nil)
	f := histAxes(&c, top, last-first+1, most, false, "% of the recording's operations", func(v float64) string { return number(v) + "%" })
	for k := 0; k < f.rows; k++ {
		i := first + k
		y := top + float64(k)*histRowH
		label := bucketLabel(i, unit)
		c.text(histLabelW-8, y+13, "end", label)
		for j, side := range []struct {
			h           *hist.Hist
			color, name string
		}{{a, ColorA, "A"}, {b, ColorB, "B"}} {
			if s := share(side.h, i); s > 0 {
				c.Rects = append(c.Rects, Rect{X: histLabelW, Y: y + 2 + float64(j)*7, W: max(1, f.scale*s), H: 7,
					Fill: side.color, Tip: fmt.Sprintf("%s %s: %d (%.1f%%)", side.name, label, side.h.Buckets[i], s)})
			}
		}
	}
	return c
}

// Series is one line of a rate chart: a value per interval.
type Series struct {
	Name, Color string
	Dash        bool
	Values      []float64
}

// Rate chart geometry: the plot area and its margins.
const (
	rateW, rateH   = 640.0, 250.0
	rateL, rateT   = 64.0, 34.0 // left and top margins
	ratePW, ratePH = rateW - rateL - 16, rateH - rateT - 40
	rateMinSeconds = 1.0
)

// RateChart draws per-interval rates as steps: each interval's rate is an
// average over it, so it is drawn flat across the interval.
func RateChart(id, yTitle string, ivs []model.Interval, ss []Series) Chart {
	c := Chart{ID: id, W: int(rateW), H: int(rateH), Label: id}
	if len(ivs) == 0 {
		return c
	}
	t0 := ivs[0].TS.Add(-time.Duration(ivs[0].Seconds * float64(time.Second)))
	sec := func(t time.Time) float64 { return t.Sub(t0).Seconds() }
	xmax, xstep := axis(max(sec(ivs[len(ivs)-1].TS), rateMinSeconds), false)
	var most float64
	for _, s := range ss {
		for _, v := range s.Values {
			most = max(most, v)
		}
	}
	ymax, ystep := axis(most, false)
	x := func(s float64) float64 { return rateL + ratePW*s/xmax }
	y := func(v float64) float64 { return rateT + ratePH*(1-v/ymax) }
	for v := 0.0; v <= ymax*(1+1e-9); v += ystep {
		c.Lines = append(c.Lines, Line{X1: rateL, Y1: y(v), X2: rateL + ratePW, Y2: y(v), Class: "grid"})
		c.text(rateL-6, y(v)+4, "end", number(v))
	}
	for s := 0.0; s <= xmax*(1+1e-9); s += xstep {
		c.text(x(s), rateT+ratePH+15, "middle", number(s)+"s")
	}
	c.Lines = append(c.Lines, Line{X1: rateL, Y1: rateT, X2: rateL, Y2: rateT + ratePH, Class: "axis"},
		Line{X1: rateL, Y1: rateT + ratePH, X2: rateL + ratePW, Y2: rateT + ratePH, Class: "axis"})
	c.text(rateL+ratePW/2, rateH-6, "middle", "seconds since the recording started")
	c.Texts = append(c.Texts, Text{X: 14, Y: rateT + ratePH/2, Anchor: "middle", Rotate: -90, S: yTitle})
	var items []Box
	dashed := map[string]bool{}
	for _, s := range ss {
		var d strings.Builder
		for i, iv := range ivs {
			end := sec(iv.TS)
			if start := end - iv.Seconds; i == 0 {
				fmt.Fprintf(&d, "M%.1f %.1f", x(start), y(s.Values[i]))
			} else {
				fmt.Fprintf(&d, "H%.1fV%.1f", x(start), y(s.Values[i]))
			}
			fmt.Fprintf(&d, "H%.1f", x(end))
		}
		c.Paths = append(c.Paths, Path{D: d.String(), Stroke: s.Color, Dash: s.Dash})
		items = append(items, Box{s.Name, s.Color})
		dashed[s.Name] = s.Dash
	}
	c.legend(rateL, 14, items, dashed)
	return c
}

// Waterfall geometry: one row per query.
const (
	wfW, wfLabelW, wfRowH, wfTop = 1000.0, 130.0, 24.0, 30.0
	wfBarW                       = wfW - wfLabelW - 20
)

// WaterfallChart draws each query's time as one bar split into the
// waterfall's boxes, 100% being that query's time (the label gives it).
func WaterfallChart(qs []model.Query) Chart {
	c := Chart{ID: "waterfall", W: int(wfW), H: int(wfTop + float64(len(qs))*wfRowH + 24), Label: "waterfall of the slowest queries"}
	c.legend(wfLabelW, 16, waterfallLegend(), nil)
	bottom := wfTop + float64(len(qs))*wfRowH
	for k := 0; k <= 4; k++ {
		x := wfLabelW + wfBarW*float64(k)/4
		c.Lines = append(c.Lines, Line{X1: x, Y1: wfTop - 2, X2: x, Y2: bottom, Class: "grid"})
		c.text(x, bottom+15, "middle", fmt.Sprintf("%d%%", 25*k))
	}
	for i := range qs {
		q := &qs[i]
		y := wfTop + float64(i)*wfRowH
		vals := boxValues(q)
		var sum uint64
		for _, v := range vals {
			sum += v
		}
		total := max(sum, q.QueryNs, 1)
		c.text(wfLabelW-8, y+16, "end", fmt.Sprintf("#%d  %s", i+1, dur(q.QueryNs)))
		x := wfLabelW
		for j, v := range vals {
			if v == 0 {
				continue
			}
			w := wfBarW * float64(v) / float64(total)
			b := model.Boxes[j]
			c.Rects = append(c.Rects, Rect{X: x, Y: y + 3, W: w, H: wfRowH - 6, Fill: b.Color,
				Tip: fmt.Sprintf("#%d %s %s (%.0f%%)", i+1, b.Short, dur(v), 100*float64(v)/float64(total))})
			x += w
		}
	}
	return c
}

// Geometry of a fingerprint's two bars, A above B: a label, the bar, and
// room after it for the mean.
const (
	boxBarsLabelW, boxBarsW, boxBarsRowH = 24.0, 420.0, 20.0
	boxBarsTextW                         = 70.0
)

// BoxLegend names the colors of the waterfall's boxes, once for all the
// bars drawn by BoxBars.
func BoxLegend() Chart {
	c := Chart{ID: "boxes-legend", W: int(wfW), H: 24, Label: "the boxes of the waterfall"}
	c.legend(2, 16, waterfallLegend(), nil)
	return c
}

// BoxBars draws a fingerprint's mean call in A and in B as two stacked
// bars, A above B, each box's time per call one segment. Both bars share
// one time scale, the longer one filling the width, so that their lengths
// compare as well as their boxes.
func BoxBars(d *output.QueryDelta) Chart {
	sides := []struct {
		tag   string
		mean  float64
		boxes map[string]float64
	}{{"A", d.MeanA, d.BoxesA}, {"B", d.MeanB, d.BoxesB}}
	// The boxes add up to the mean, unless they overran it (another
	// clock path): then the longest sum sets the scale, never overflowing.
	scale := max(d.MeanA, d.MeanB)
	for _, s := range sides {
		scale = max(scale, boxSum(s.boxes))
	}
	scale = max(scale, 1)
	c := Chart{ID: "boxes-" + d.Fingerprint, W: int(boxBarsLabelW + boxBarsW + boxBarsTextW), H: int(2*boxBarsRowH + 2),
		Label: "mean call in A and in B, by box of the waterfall"}
	for i, s := range sides {
		y := float64(i) * boxBarsRowH
		c.text(boxBarsLabelW-8, y+14, "end", s.tag)
		x := boxBarsLabelW
		for _, b := range model.Boxes {
			v := s.boxes[b.Name]
			if v <= 0 {
				continue
			}
			w := boxBarsW * v / scale
			c.Rects = append(c.Rects, Rect{X: x, Y: y + 2, W: w, H: boxBarsRowH - 4, Fill: b.Color,
				Tip: fmt.Sprintf("%s %s: %s per call (%.0f%%)", s.tag, b.Short, dur(uint64(v)), 100*v/max(s.mean, 1))})
			x += w
		}
		// The bar's outline: its whole length, for the eye and for tests.
		c.Rects = append(c.Rects, Rect{X: boxBarsLabelW, Y: y + 2, W: x - boxBarsLabelW, H: boxBarsRowH - 4, Fill: "none",
			Class: "bar-" + strings.ToLower(s.tag), Tip: fmt.Sprintf("%s: %s per call", s.tag, dur(uint64(s.mean)))})
		c.text(x+6, y+14, "start", dur(uint64(s.mean)))
	}
	return c
}

func boxSum(m map[string]float64) float64 {
	var sum float64
	for _, v := range m {
		sum += v
	}
	return sum
}
