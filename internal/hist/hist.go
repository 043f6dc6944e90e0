// Package hist is the one definition of the log2 histogram used everywhere in
// dbiolat: by the BPF programs (which fill the same slots in kernel maps), by
// the aggregation code, by the text and JSON outputs and by recordings.
//
// Keeping the slot convention in one place matters because histograms cross
// the kernel/user boundary as bare arrays of counts: if the two sides
// disagreed about which values a slot holds, every latency we print would be
// off by a factor of two without any error being raised.
package hist

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
)

// Slots is the number of log2 slots: enough for every uint64 value, so no
// value is ever clamped into an overflow bucket.
const Slots = 64

// Slot returns the histogram slot of v. This is THE definition of the slot
// convention; the BPF C code computes the same thing:
//
//	slot(v) = 0              for v < 2
//	slot(v) = floor(log2(v)) otherwise
//
// so slot i (i >= 1) holds [2^i, 2^(i+1)) and slot 0 holds [0, 2). Values
// are nanoseconds for latency histograms and bytes for size histograms.
func Slot(v uint64) int {
	if v < 2 {
		return 0
	}
	return bits.Len64(v) - 1
}

// SlotRange returns the half-open range [lo, hi) of values that Slot maps to
// slot i. Slot 0 is [0, 2). For slot 63 the true upper bound 2^64 does not
// fit in a uint64, so hi is math.MaxUint64; that slot alone also holds
// math.MaxUint64 itself. It panics if i is not in [0, Slots).
func SlotRange(i int) (lo, hi uint64) {
	switch {
	case i < 0 || i >= Slots:
		panic(fmt.Sprintf("hist: slot %d out of range [0, %d)", i, Slots))
	case i == 0:
		return 0, 2
	case i == Slots-1:
		return 1 << i, math.MaxUint64
	default:
		return 1 << i, 1 << (i + 1)
	}
}

// Hist is a log2 histogram. The zero value is an empty histogram.
//
// Count is always the sum of Buckets. Sum is kept beside the buckets because
// the buckets alone can only give the mean to within a factor of two.
type Hist struct {
	Buckets [Slots]uint64
	Count   uint64
	Sum     uint64 // exact sum of values (ns), kept beside the buckets so the mean is exact
}

// Add records one value.
func (h *Hist) Add(v uint64) { h.AddN(v, 1) }

// AddN adds n values whose sum is total, each at their mean: what is
// known of statements timed together.
func (h *Hist) AddN(total, n uint64) {
	if n == 0 {
		return
	}
	h.Buckets[Slot(total/n)] += n
	h.Count += n
	h.Sum += total
}

// AddSlot adds n values to a slot. It is for histograms read from BPF maps,
// which carry only per-slot counts: Sum is not touched, so the caller must
// set it from its own (kernel-side) total. It panics if slot is out of
// range, since BPF maps keyed by Slot can never produce such a key.
func (h *Hist) AddSlot(slot int, n uint64) {
	if slot < 0 || slot >= Slots {
		panic(fmt.Sprintf("hist: slot %d out of range [0, %d)", slot, Slots))
	}
	h.Buckets[slot] += n
	h.Count += n
}

// Merge adds all of o into h. A nil o is an empty histogram.
func (h *Hist) Merge(o *Hist) {
	if o == nil {
		return
	}
	for i, n := range o.Buckets {
		h.Buckets[i] += n
	}
	h.Count += o.Count
	h.Sum += o.Sum
}

// Mean returns Sum/Count, or 0 for an empty histogram.
func (h *Hist) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return float64(h.Sum) / float64(h.Count)
}

// Quantile estimates the q-quantile (q in [0,1], clamped) of the recorded
// values: it finds the slot holding rank q*Count and interpolates linearly
// inside that slot's [lo, hi), i.e. it assumes values are spread evenly
// within a slot, then clamps the estimate to Range. The result is always
// inside the slot, so the estimate is never off by more than the slot's
// width, and never outside what was recorded as far as the histogram can
// tell: one sleep of 91.1 ms has p50 and p99 of 91.1 ms, not 101 and
// 134 ms. It returns 0 for an empty histogram.
func (h *Hist) Quantile(q float64) uint64 {
	if h.Count == 0 {
		return 0
	}
	if !(q > 0) { // also catches NaN
		q = 0
	}
	if q > 1 {
		q = 1
	}
	lo, hi := h.Range()
	rank := q * float64(h.Count)
	var cum float64
	last := 0
	for i, n := range h.Buckets {
		if n == 0 {
			continue
		}
		last = i
		c := float64(n)
		if cum+c >= rank {
			return min(max(interpolate(i, (rank-cum)/c), lo), hi)
		}
		cum += c
	}
	// Only reachable through float rounding with q close to 1 (or if the
	// caller broke the Count invariant): answer with the top of the data.
	return min(max(interpolate(last, 1), lo), hi)
}

// interpolate returns the value a fraction f of the way through slot i,
// kept strictly below hi so that Slot(result) == i.
func interpolate(i int, f float64) uint64 {
	lo, hi := SlotRange(i)
	width := hi - lo
	// Offset from lo rather than converting lo+f*width: for slot 63 the
	// absolute value could round up to 2^64, which does not convert.
	off := uint64(math.Max(0, f) * float64(width))
	if off >= width {
		off = width - 1
	}
	return lo + off
}

// Range returns the narrowest bounds, inclusive, that surely hold the
// smallest and the largest recorded value (both 0 for an empty
// histogram). Kernel histograms carry only counts per slot and the exact
// Sum, so that is all it reads, and it is exact as far as they go:
//
//   - every value lies in its slot, so the smallest is at least the
//     lowest slot's bottom and the largest at most the highest slot's top;
//   - the largest is Sum less all the others, and each other value is at
//     least its slot's bottom, so the largest is at most Sum less those
//     bottoms; likewise the smallest is at least Sum less the other
//     values' tops.
//
// With one value both bounds are that value (Sum); with many they narrow
// only as far as the sum proves. A histogram read while the kernel wrote
// it may have a Sum that disagrees with its slots: then the slots alone
// bound it.
func (h *Hist) Range() (lo, hi uint64) {
	if h.Count == 0 {
		return 0, 0
	}
	first, last := -1, 0
	var bottoms, tops uint64 // every value's slot bottom, summed; its slot top, summed
	overflow := false        // of tops (bottoms do not pass Sum, which is a uint64, unless Sum disagrees)
	for i, n := range h.Buckets {
		if n == 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
		b, t := slotBounds(i)
		bottoms = addSat(bottoms, mulSat(b, n))
		tops = addSat(tops, mulSat(t, n))
		overflow = overflow || tops == math.MaxUint64
	}
	firstBottom, firstTop := slotBounds(first)
	lastBottom, lastTop := slotBounds(last)
	lo, hi = firstBottom, lastTop
	// Each bound is taken only if it lies in its slot, as it must when Sum
	// agrees with the slots.
	if others := bottoms - lastBottom; h.Sum >= others && h.Sum-others >= lastBottom {
		hi = min(hi, h.Sum-others)
	}
	if others := tops - firstTop; !overflow && h.Sum > others && h.Sum-others <= firstTop {
		lo = max(lo, h.Sum-others)
	}
	if lo > hi {
		return firstBottom, lastTop
	}
	return lo, hi
}

// slotBounds is SlotRange with an inclusive top: the smallest and largest
// value slot i holds.
func slotBounds(i int) (lo, top uint64) {
	lo, hi := SlotRange(i)
	if i == Slots-1 {
		return lo, hi // slot 63 holds math.MaxUint64 itself
	}
	return lo, hi - 1
}

// addSat and mulSat saturate at math.MaxUint64 instead of wrapping.
func addSat(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// jsonHist is the wire form: only non-empty buckets, each with its explicit
// value range, so a reader needs no knowledge of the slot convention.
type jsonHist struct {
	Count   uint64       `json:"count"`
	Sum     uint64       `json:"sum"`
	Buckets []jsonBucket `json:"buckets"`
}

type jsonBucket struct {
	Lo    uint64 `json:"lo"`
	Hi    uint64 `json:"hi"`
	Count uint64 `json:"count"`
}

// MarshalJSON writes {"count":N,"sum":S,"buckets":[{"lo":..,"hi":..,"count":..},...]}
// listing only non-empty buckets. It has a value receiver so that Hist
// fields of structs marshal this way even when not addressable.
func (h Hist) MarshalJSON() ([]byte, error) {
	j := jsonHist{Count: h.Count, Sum: h.Sum, Buckets: []jsonBucket{}}
	for i, n := range h.Buckets {
		if n == 0 {
			continue
		}
		lo, hi := SlotRange(i)
		j.Buckets = append(j.Buckets, jsonBucket{Lo: lo, Hi: hi, Count: n})
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the form written by MarshalJSON, replacing h. Buckets
// must have exactly the bounds of a slot, appear at most once, and add up to
// count: a recording that breaks these was not written by us (or was written
// under another slot convention), and silently re-bucketing it would
// misreport latencies.
func (h *Hist) UnmarshalJSON(data []byte) error {
	var j jsonHist
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var out Hist
	var seen [Slots]bool
	var total uint64
	for _, b := range j.Buckets {
		i := Slot(b.Lo)
		if lo, hi := SlotRange(i); lo != b.Lo || hi != b.Hi {
			return fmt.Errorf("hist: bucket [%d, %d) is not a log2 slot", b.Lo, b.Hi)
		}
		if seen[i] {
			return fmt.Errorf("hist: duplicate bucket [%d, %d)", b.Lo, b.Hi)
		}
		seen[i] = true
		out.Buckets[i] = b.Count
		total += b.Count
	}
	if total != j.Count {
		return fmt.Errorf("hist: count %d does not match bucket total %d", j.Count, total)
	}
	out.Count = j.Count
	out.Sum = j.Sum
	*h = out
	return nil
}
