package top

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
)

// Style is how the screen shows a line; the plain output ignores it.
type Style int

const (
	Normal   Style = iota
	Title          // the first line
	Header         // a table's column names
	Selected       // the fingerprint selected
	Alert          // losses
	Prompt         // a line being typed: the cursor goes at its end
	Dim            // the keys' help
)

// Line is one line of the display.
type Line struct {
	Text  string
	Style Style
}

// plainRows is how many rows of each table the plain output shows.
const plainRows = 20

// Render lays a frame out in lines of at most width characters. With a
// height, they fill a screen of that height, the last line for the keys
// (or the prompt, or a message), and the fingerprints' table scrolls to
// the selection; with height 0 it is the plain output: the first 20 rows
// of each table, no keys. recent is the selected fingerprint's latest
// queries, newest first, shown when the view asks for them.
func Render(f *Frame, v *View, recent []model.Query, width, height int) []Line {
	var out []Line
	add := func(style Style, text string) { out = append(out, Line{fit(text, width), style}) }
	add(Title, title(f, width))
	state := fmt.Sprintf("interval %.2fs  %.1f queries/s  traced since %s (%s)", f.Seconds, f.QueriesPerSec,
		f.Since.Format("15:04:05"), f.TS.Sub(f.Since).Round(time.Second))
	if s := f.Filter.String(); s != "" {
		state += "  filter: " + s
	}
	if v.Frozen {
		state += "  FROZEN (f: go on)"
	}
	add(Normal, state)
	if lost := losses(f.Drops); len(lost) > 0 {
		add(Alert, output.DropsText(lost)) // losses only: notes are in the closing summary
	}
	interactive := height > 0
	footer := func() Line {
		switch {
		case v.prompt != nil:
			return Line{fit(v.prompt.label+string(v.prompt.text), width), Prompt}
		case v.Status != "":
			return Line{fit(v.Status, width), Alert}
		case v.Detail:
			return Line{fit("Esc back  q quit  f freeze", width), Dim}
		}
		return Line{fit(Help, width), Dim}
	}
	if v.Detail && interactive {
		out = detail(out, f, v, recent, width, height-len(out)-1)
		return screen(out, height, footer())
	}

	// The rows each table gets: a screen's height shared, the fingerprints
	// first, the rates at most a quarter.
	fpN, beN, rateN := min(len(f.Fingerprints), plainRows), min(len(f.Backends), plainRows), len(f.Rates)
	if interactive {
		// Besides rows: per table a blank line, its title and its header,
		// a line when it is empty or rows were left out; the footer.
		avail := height - len(out) - 3*3 - 1
		for _, n := range []uint64{uint64(len(f.Fingerprints)), uint64(len(f.Backends)), uint64(len(f.Rates))} {
			if n == 0 {
				avail--
			}
		}
		for _, n := range []uint64{f.UnlistedFingerprints, f.UnlistedBackends} {
			if n > 0 {
				avail--
			}
		}
		avail = max(0, avail)
		rateN = min(len(f.Rates), avail/4)
		avail -= rateN
		fpN = min(len(f.Fingerprints), (avail+1)/2)
		beN = min(len(f.Backends), avail-fpN)
		fpN = min(len(f.Fingerprints), avail-beN) // what the backends leave
		v.scroll(fpN)
	}
	add(Normal, "")
	add(Normal, fmt.Sprintf("%d query fingerprints in the interval%s", len(f.Fingerprints), shown(fpN, len(f.Fingerprints))))
	out = table(out, f.Fingerprints, fingerprints, v, width, fpN, interactive)
	if f.UnlistedFingerprints > 0 {
		add(Alert, fmt.Sprintf("+ %d queries not listed: over %d rows in the interval", f.UnlistedFingerprints, maxRows))
	}
	add(Normal, "")
	add(Normal, fmt.Sprintf("%d backends ran queries, each with its last one%s", len(f.Backends), shown(beN, len(f.Backends))))
	out = table(out, f.Backends, backends, v, width, beN, false)
	if f.UnlistedBackends > 0 {
		add(Alert, fmt.Sprintf("+ %d queries not listed: over %d rows in the interval", f.UnlistedBackends, maxRows))
	}
	add(Normal, "")
	add(Normal, "I/O per second by layer, role and device"+shown(rateN, len(f.Rates)))
	add(Header, output.RatesHeader())
	for i := range f.Rates[:rateN] {
		add(Normal, output.RateLine(&f.Rates[i]))
	}
	if len(f.Rates) == 0 {
		add(Normal, "(no I/O)")
	}
	if interactive {
		return screen(out, height, footer())
	}
	return out
}

// screen makes lines a screen's height, the footer last.
func screen(out []Line, height int, footer Line) []Line {
	for len(out) < height-1 {
		out = append(out, Line{})
	}
	return append(out[:height-1], footer)
}

func title(f *Frame, width int) string {
	left, right := "dbiolat top: "+f.Servers, f.TS.Format("15:04:05")
	if pad := width - utf8.RuneCountInString(left) - len(right); pad > 0 {
		return left + strings.Repeat(" ", pad) + right
	}
	return left + "  " + right
}

func shown(n, of int) string {
	if n < of {
		return fmt.Sprintf(" (%d shown)", n)
	}
	return ""
}

// losses are the drop counters that count something missing, non-zero.
func losses(d model.Drops) model.Drops {
	lost := model.Drops{}
	for _, c := range model.Counters {
		if c.Loss && d[c.Name] > 0 {
			lost[c.Name] = d[c.Name]
		}
	}
	return lost
}

// scroll moves the fingerprints' table so that the selection is among
// its n rows shown.
func (v *View) scroll(n int) {
	if n <= 0 {
		v.offset = 0
		return
	}
	v.offset = min(v.offset, v.index)
	v.offset = max(v.offset, v.index-n+1, 0)
}

// table appends a table's header and n of its rows. The sort column is
// marked in the header by a v (the largest first) or a ^ before its name.
func table(out []Line, rows []Row, t tables, v *View, width, n int, selecting bool) []Line {
	sortCol, _ := columnOf(v.Sort)
	if columns[sortCol].in&t == 0 {
		sortCol, _ = columnOf("total")
	}
	var head strings.Builder
	for i, c := range columns {
		if c.in&t == 0 {
			continue
		}
		mark := " "
		if i == sortCol {
			mark = "^"
			if c.desc != (v.Reverse && columns[sortCol].name == v.Sort) {
				mark = "v"
			}
		}
		// The mark takes the separator's place, against the name.
		head.WriteString(cell(mark+c.title, c.width+min(c.width, 1), !c.desc))
	}
	out = append(out, Line{fit(head.String(), width), Header})
	from := 0
	if selecting {
		from = v.offset
	}
	for k := from; k < min(from+n, len(rows)); k++ {
		r := &rows[k]
		var b strings.Builder
		for _, c := range columns {
			if c.in&t != 0 {
				b.WriteByte(' ')
				b.WriteString(cell(c.text(r), c.width, !c.desc))
			}
		}
		style := Normal
		if selecting && k == v.index {
			style = Selected
		}
		out = append(out, Line{fit(b.String(), width), style})
	}
	if len(rows) == 0 {
		out = append(out, Line{" (none)", Normal})
	}
	return out
}

// cell fits text in a column: numbers to the right, text to the left;
// width 0 is the rest of the line (cut by fit).
func cell(text string, width int, left bool) string {
	n := utf8.RuneCountInString(text)
	switch {
	case width == 0:
		return text
	case n > width:
		return string([]rune(text)[:width])
	case left:
		return text + strings.Repeat(" ", width-n)
	}
	return strings.Repeat(" ", width-n) + text
}

// fit cuts a line to width characters.
func fit(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	return string([]rune(s)[:width])
}

// wrap breaks a line into lines of width characters, the ones after the
// first indented.
func wrap(s string, width int) []string {
	const indent = "    "
	r := []rune(s)
	if width <= len(indent) || len(r) <= width {
		return []string{fit(s, width)}
	}
	out := []string{string(r[:width])}
	for r = r[width:]; len(r) > 0; {
		n := min(len(r), width-len(indent))
		out = append(out, indent+string(r[:n]))
		r = r[n:]
	}
	return out
}

// detail appends the selected fingerprint's row and latest queries as
// slow-log lines, in at most height lines.
func detail(out []Line, f *Frame, v *View, recent []model.Query, width, height int) []Line {
	var lines []Line
	add := func(style Style, text string) {
		for _, l := range wrap(text, width) {
			lines = append(lines, Line{l, style})
		}
	}
	add(Normal, "")
	fp := v.selected
	summary, text := "fingerprint "+fp+": no query in the interval", ""
	if len(recent) > 0 {
		text = recent[0].Query
	}
	for i := range f.Fingerprints {
		if r := &f.Fingerprints[i]; r.Fingerprint == fp {
			text = r.Query
			summary = fmt.Sprintf("fingerprint %s: %d calls (%.1f/s), total %s, mean %s, fs %d, blk %d in the interval", fp,
				r.Calls, r.CallsPerSec, dur(r.TotalNs), dur(r.MeanNs), r.FSCount, r.BlkCount)
		}
	}
	add(Header, summary)
	if text != "" {
		add(Normal, output.OneLine(text))
	}
	if len(recent) == 0 {
		add(Normal, fmt.Sprintf("(no query of it kept: top keeps those of %s or more, one in %.0f of the others and those the kernel does not count, of the %d busiest fingerprints)",
			dur(uint64(Slow)), 1/Sample, maxFingerprints))
		return append(out, lines[:min(len(lines), max(0, height))]...)
	}
	add(Normal, "")
	add(Normal, fmt.Sprintf("its last %d queries (of %d kept), the newest first:", len(recent), RecentKept))
	var b []byte
	for i := range recent {
		b = output.AppendSlowLine(b[:0], &recent[i])
		add(Normal, string(b))
	}
	return append(out, lines[:min(len(lines), max(0, height))]...)
}
