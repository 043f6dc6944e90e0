package hist

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Unit says what a histogram's values measure, which decides its labels.
type Unit int

const (
	Time  Unit = iota // nanoseconds
	Bytes             // bytes
)

// barWidth is the width of the distribution bar, as in bcc.
const barWidth = 40

// Render writes a bcc-style text histogram:
//
//	 time          : count     distribution
//	256ns -> 512ns : 3        |**********                              |
//	512ns -> 1us   : 12       |****************************************|
//
// Leading and trailing empty slots are omitted (interior empty slots are
// shown, so gaps in the distribution stay visible); bars are scaled so the
// largest count fills barWidth, rounding down as bcc does. An empty histogram
// renders as nothing, leaving the caller to say so in its own words.
//
// Labels are slot bounds written with human units. For Time they step units
// every 10 slots (2^10 ns is labelled 1us, 2^20 ns 1ms, 2^30 ns 1s), the way
// bpftrace writes 1K for 1024: the labels stay short powers of two at the
// cost of being up to ~7% off in seconds. Exact bounds are in the JSON form.
// For Bytes the binary units are exact.
func (h *Hist) Render(w io.Writer, unit Unit) error {
	first, last := -1, -1
	var maxCount uint64
	for i, n := range h.Buckets {
		if n == 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
		maxCount = max(maxCount, n)
	}
	if first < 0 {
		return nil
	}

	type row struct{ lo, hi string }
	rows := make([]row, 0, last-first+1)
	loW, hiW := 0, 0
	for i := first; i <= last; i++ {
		var r row
		r.lo, r.hi = SlotLabel(i, unit)
		loW, hiW = max(loW, len(r.lo)), max(hiW, len(r.hi))
		rows = append(rows, r)
	}
	countW := max(8, len(strconv.FormatUint(maxCount, 10)))

	name := "time"
	if unit == Bytes {
		name = "size"
	}
	// The name sits right-aligned over the low bounds, as bcc's does.
	labelW := loW + len(" -> ") + hiW
	header := fmt.Sprintf("%*s", loW, name)

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%-*s : %-*s distribution\n", labelW, header, countW+1, "count")
	for k, r := range rows {
		n := h.Buckets[first+k]
		stars := int(float64(n) * barWidth / float64(maxCount))
		fmt.Fprintf(bw, "%*s -> %-*s : %-*d |%-*s|\n",
			loW, r.lo, hiW, r.hi, countW, n, barWidth, strings.Repeat("*", stars))
	}
	return bw.Flush()
}

// SlotLabel labels the bounds of slot i as Render does, "64us" and
// "128us" for slot 16 of a Time histogram (slot 0 starts at "0").
func SlotLabel(i int, unit Unit) (lo, hi string) {
	lo, hi = slotLabel(i, unit), slotLabel(i+1, unit)
	if i == 0 {
		lo = "0"
	}
	return lo, hi
}

// slotLabel labels 2^e in the given unit (e in [0, 64]).
func slotLabel(e int, unit Unit) string {
	if unit == Bytes {
		units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
		return strconv.FormatUint(1<<(e%10), 10) + units[e/10]
	}
	units := []string{"ns", "us", "ms"}
	if k := e / 10; k < len(units) {
		return strconv.FormatUint(1<<(e%10), 10) + units[k]
	}
	return strconv.FormatUint(1<<(e-30), 10) + "s" // no larger unit: stay in seconds
}

// FormatDuration formats nanoseconds with 3 significant digits and trailing
// zeros dropped: "812ns", "3.4us", "12.1ms", "1.52s". Every duration the
// tool prints goes through here so that columns read the same everywhere.
// Durations of 1000s and more are whole seconds.
func FormatDuration(ns uint64) string {
	if ns < 1000 {
		return strconv.FormatUint(ns, 10) + "ns"
	}
	x := float64(ns)
	for _, u := range []string{"us", "ms"} {
		x /= 1000
		// 'g' with precision 3 gives 3 significant digits without trailing
		// zeros, and switches to an exponent exactly when x rounds to 1000
		// or more: then the next unit is the right one.
		if s := strconv.FormatFloat(x, 'g', 3, 64); !strings.Contains(s, "e") {
			return s + u
		}
	}
	x /= 1000
	if s := strconv.FormatFloat(x, 'g', 3, 64); !strings.Contains(s, "e") {
		return s + "s"
	}
	return strconv.FormatFloat(x, 'f', 0, 64) + "s"
}

// FormatBytes formats a byte count with binary units and one decimal:
// "512B", "8.0KiB", "3.1MiB", "1.2GiB".
func FormatBytes(b uint64) string {
	if b < 1024 {
		return strconv.FormatUint(b, 10) + "B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	x := float64(b)
	for i, u := range units {
		x /= 1024
		// Move up a unit if x would print as 1024.0 (e.g. 1048575 bytes is
		// "1.0MiB", not "1024.0KiB").
		if x < 1023.95 || i == len(units)-1 {
			return strconv.FormatFloat(x, 'f', 1, 64) + u
		}
	}
	panic("unreachable")
}
