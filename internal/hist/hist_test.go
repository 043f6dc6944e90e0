package hist

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestSlotBoundaries(t *testing.T) {
	cases := []struct {
		v    uint64
		slot int
	}{
		{0, 0}, {1, 0}, {2, 1}, {3, 1}, {4, 2}, {7, 2}, {8, 3},
		{1023, 9}, {1024, 10}, {1025, 10},
		{math.MaxUint64, 63},
	}
	for _, c := range cases {
		if got := Slot(c.v); got != c.slot {
			t.Errorf("Slot(%d) = %d, want %d", c.v, got, c.slot)
		}
	}
	// 2^k-1 is the top of slot k-1 and 2^k the bottom of slot k, for all k.
	for k := 1; k < 64; k++ {
		p := uint64(1) << k
		want := k - 1
		if k == 1 {
			want = 0 // 1 is in slot 0 with 0
		}
		if got := Slot(p - 1); got != want {
			t.Errorf("Slot(2^%d-1) = %d, want %d", k, got, want)
		}
		if got := Slot(p); got != k {
			t.Errorf("Slot(2^%d) = %d, want %d", k, got, k)
		}
	}
}

func TestSlotRangeConsistent(t *testing.T) {
	var prevHi uint64
	for i := 0; i < Slots; i++ {
		lo, hi := SlotRange(i)
		if lo != prevHi {
			t.Errorf("slot %d: lo = %d, want %d (slots must tile)", i, lo, prevHi)
		}
		if Slot(lo) != i || Slot(hi-1) != i {
			t.Errorf("slot %d: [%d, %d) maps to slots %d..%d", i, lo, hi, Slot(lo), Slot(hi-1))
		}
		prevHi = hi
	}
	if lo, hi := SlotRange(0); lo != 0 || hi != 2 {
		t.Errorf("SlotRange(0) = [%d, %d), want [0, 2)", lo, hi)
	}
	if _, hi := SlotRange(63); hi != math.MaxUint64 {
		t.Errorf("SlotRange(63) hi = %d, want MaxUint64", hi)
	}
	if Slot(math.MaxUint64) != 63 {
		t.Error("MaxUint64 must land in slot 63")
	}
}

func inSlot(t *testing.T, name string, v uint64, slot int) {
	t.Helper()
	if Slot(v) != slot {
		lo, hi := SlotRange(slot)
		t.Errorf("%s = %d, want in slot %d [%d, %d)", name, v, slot, lo, hi)
	}
}

func TestQuantile(t *testing.T) {
	var empty Hist
	if empty.Quantile(0.5) != 0 || empty.Mean() != 0 {
		t.Error("empty histogram must give 0")
	}

	// 1000 values in one bucket: every quantile is inside it, in order.
	var one Hist
	for i := 0; i < 1000; i++ {
		one.Add(1024 + uint64(i))
	}
	prev := uint64(0)
	for _, q := range []float64{0, 0.01, 0.5, 0.99, 1} {
		v := one.Quantile(q)
		inSlot(t, "one bucket quantile", v, 10)
		if v < prev {
			t.Errorf("Quantile(%v) = %d < previous %d", q, v, prev)
		}
		prev = v
	}
	if got := one.Quantile(0.5); got != 1024+512 {
		t.Errorf("p50 = %d, want midpoint 1536", got)
	}
	if one.Quantile(0) != 1024 || one.Quantile(1) != 2047 {
		t.Errorf("p0, p100 = %d, %d; want 1024, 2047", one.Quantile(0), one.Quantile(1))
	}
	if one.Quantile(-1) != one.Quantile(0) || one.Quantile(2) != one.Quantile(1) || one.Quantile(math.NaN()) != one.Quantile(0) {
		t.Error("q outside [0,1] must clamp")
	}
	if lo, hi := one.Range(); lo != 1024 || hi != 2047 {
		t.Errorf("Range = [%d, %d], want the slot's [1024, 2047]: a sum of 1000 values says nothing narrower", lo, hi)
	}

	// Two modes: 900 fast (~1us) and 100 slow (~1ms).
	var two Hist
	for i := 0; i < 900; i++ {
		two.Add(1500)
	}
	for i := 0; i < 100; i++ {
		two.Add(1_500_000)
	}
	inSlot(t, "p50", two.Quantile(0.5), 10)
	inSlot(t, "p89", two.Quantile(0.89), 10)
	inSlot(t, "p95", two.Quantile(0.95), 20)
	inSlot(t, "p99", two.Quantile(0.99), 20)

	// Top slot must not overflow.
	var top Hist
	top.Add(math.MaxUint64)
	inSlot(t, "top p100", top.Quantile(1), 63)
	inSlot(t, "top p0", top.Quantile(0), 63)
}

// A single sleep of 91.1 ms once printed "mean 91.1ms, p50 101ms, p99
// 134ms": quantiles of the slot, not of what was recorded. With one value,
// its count and sum say exactly what it was, however the histogram was
// filled (Add in Go, or slots and sum read from a kernel map).
func TestQuantileOneValue(t *testing.T) {
	const v = 91_100_000
	var added, kernel Hist
	added.Add(v)
	kernel.AddSlot(Slot(v), 1)
	kernel.Sum = v
	for name, h := range map[string]*Hist{"Add": &added, "AddSlot": &kernel} {
		for _, q := range []float64{0, 0.5, 0.99, 1} {
			if got := h.Quantile(q); got != v {
				t.Errorf("%s: Quantile(%v) = %d, want the one value %d", name, q, got, v)
			}
		}
		if lo, hi := h.Range(); lo != v || hi != v {
			t.Errorf("%s: Range = [%d, %d], want [%d, %d]", name, lo, hi, v, v)
		}
	}
	var zero Hist
	zero.Add(0)
	if lo, hi := zero.Range(); lo != 0 || hi != 0 || zero.Quantile(1) != 0 {
		t.Errorf("one 0: Range = [%d, %d], p100 %d; want all 0", lo, hi, zero.Quantile(1))
	}
}

// Range holds every recorded value (it is a bound, never an estimate) and
// narrows to them as far as count and sum prove it; quantiles stay inside
// it and in order.
func TestRange(t *testing.T) {
	sets := [][]uint64{
		{70_000_000, 91_100_000},                    // two in one slot: the larger is at most sum - 2^26
		{1500, 1_500_000},                           // two slots, one value each: both exact
		{1500, 1600, 1_500_000},                     // the bottom slot's two are bounded, not exact
		{3, 1 << 40, 1<<41 - 1, math.MaxUint64 / 4}, // far apart, large sums
	}
	for i := uint64(1); i < 300; i++ {
		sets = append(sets, []uint64{i * i * 97 % 100_000, i * 7919 % 4096, i})
	}
	for _, vs := range sets {
		var h Hist
		minV, maxV := uint64(math.MaxUint64), uint64(0)
		for _, v := range vs {
			h.Add(v)
			minV, maxV = min(minV, v), max(maxV, v)
		}
		lo, hi := h.Range()
		if lo > minV || hi < maxV {
			t.Fatalf("%v: Range = [%d, %d] does not hold [%d, %d]", vs, lo, hi, minV, maxV)
		}
		prev := lo
		for _, q := range []float64{0, 0.25, 0.5, 0.75, 0.99, 1} {
			v := h.Quantile(q)
			if v < prev || v > hi {
				t.Fatalf("%v: Quantile(%v) = %d, outside [%d, %d] or below the one before", vs, q, v, prev, hi)
			}
			prev = v
		}
	}
	// Two values, one per slot: the larger is the sum less the smaller,
	// which is at least 1024; the smaller's slot [1024, 2047] says more
	// than the sum less the larger's top.
	var two Hist
	two.Add(1500)
	two.Add(1_500_000)
	if lo, hi := two.Range(); lo != 1024 || hi != 1500+1_500_000-1024 {
		t.Errorf("two slots: Range = [%d, %d], want [1024, %d]", lo, hi, 1500+1_500_000-1024)
	}
	// Two in one slot: the sum less the other's least (2^26) bounds the larger.
	var pair Hist
	pair.Add(70_000_000)
	pair.Add(91_100_000)
	if _, hi := pair.Range(); hi != 70_000_000+91_100_000-1<<26 {
		t.Errorf("pair: hi = %d, want %d", hi, 70_000_000+91_100_000-1<<26)
	}
}

// A kernel histogram read while it was written may have slots the sum
// does not cover (or a sum past what the slots hold): the slots alone
// bound it then, and quantiles stay in their slots.
func TestRangeSumDisagrees(t *testing.T) {
	var h Hist
	h.AddSlot(10, 3)
	h.AddSlot(20, 1)
	h.Sum = 1000 // less than the slots' bottoms (3*1024 + 2^20)
	if lo, hi := h.Range(); lo != 1024 || hi != 1<<21-1 {
		t.Errorf("sum too small: Range = [%d, %d], want the slots' [1024, %d]", lo, hi, 1<<21-1)
	}
	inSlot(t, "p99", h.Quantile(0.99), 20)
	h.Sum = math.MaxUint64 // more than the slots' tops
	if lo, hi := h.Range(); lo != 1024 || hi != 1<<21-1 {
		t.Errorf("sum too large: Range = [%d, %d], want the slots' [1024, %d]", lo, hi, 1<<21-1)
	}
	inSlot(t, "p0", h.Quantile(0), 10)
}

func TestMergeAndMean(t *testing.T) {
	var a, b, all Hist
	for v := uint64(0); v < 5000; v += 7 {
		a.Add(v)
		all.Add(v)
	}
	for v := uint64(3); v < 90000; v += 13 {
		b.Add(v)
		all.Add(v)
	}
	a.Merge(&b)
	a.Merge(nil)
	if a != all {
		t.Errorf("merged histogram differs from one built directly")
	}

	var h Hist
	for _, v := range []uint64{1, 2, 3, 1000, 1_000_000} {
		h.Add(v)
	}
	if h.Sum != 1_001_006 || h.Count != 5 {
		t.Errorf("Sum, Count = %d, %d", h.Sum, h.Count)
	}
	if h.Mean() != 1_001_006.0/5 {
		t.Errorf("Mean = %v, want exact 200201.2", h.Mean())
	}
}

func TestAddSlot(t *testing.T) {
	var h Hist
	h.AddSlot(10, 5)
	h.AddSlot(10, 2)
	h.AddSlot(0, 1)
	if h.Buckets[10] != 7 || h.Buckets[0] != 1 || h.Count != 8 || h.Sum != 0 {
		t.Errorf("AddSlot: %+v", h)
	}
	defer func() {
		if recover() == nil {
			t.Error("AddSlot(64) must panic")
		}
	}()
	h.AddSlot(Slots, 1)
}

func TestRenderTime(t *testing.T) {
	var h Hist
	h.AddSlot(8, 3)  // [256ns, 512ns)
	h.AddSlot(9, 12) // [512ns, 1us)
	// slot 10 empty but interior: shown with 0
	h.AddSlot(11, 6)  // [2us, 4us)
	h.AddSlot(22, 1)  // [4ms, 8ms): 40*1/12 = 3 stars
	h.AddSlot(30, 12) // [1s, 2s)
	var buf bytes.Buffer
	if err := h.Render(&buf, Time); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1+(30-8+1) {
		t.Fatalf("got %d lines, want header + 23 slots:\n%s", len(lines), buf.String())
	}
	want := map[int]string{
		0:  " time          : count     distribution",
		1:  "256ns -> 512ns : 3        |**********                              |",
		2:  "512ns -> 1us   : 12       |****************************************|",
		3:  "  1us -> 2us   : 0        |                                        |",
		4:  "  2us -> 4us   : 6        |********************                    |",
		15: "  4ms -> 8ms   : 1        |***                                     |",
		23: "   1s -> 2s    : 12       |****************************************|",
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], w)
		}
	}
	// Every line lines up: same width, bar delimiters in the same columns.
	for i, l := range lines[1:] {
		if len(l) != len(lines[1]) || l[len(l)-1] != '|' || l[len(l)-barWidth-2] != '|' {
			t.Errorf("line %d misaligned: %q", i+1, l)
		}
	}

	var empty Hist
	buf.Reset()
	if err := empty.Render(&buf, Time); err != nil || buf.Len() != 0 {
		t.Errorf("empty render = %q, %v; want nothing", buf.String(), err)
	}
}

func TestRenderBytes(t *testing.T) {
	var h Hist
	h.Add(0)    // slot 0: [0, 2B)
	h.Add(1)    // slot 0
	h.Add(4096) // slot 12: [4KiB, 8KiB)
	h.Add(5000)
	h.Add(6000)
	h.Add(8192) // slot 13
	var buf bytes.Buffer
	if err := h.Render(&buf, Bytes); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1+14 {
		t.Fatalf("got %d lines:\n%s", len(lines), buf.String())
	}
	want := map[int]string{
		0:  "size          : count     distribution",
		1:  "   0 -> 2B    : 2        |**************************              |",
		2:  "  2B -> 4B    : 0        |                                        |",
		11: "1KiB -> 2KiB  : 0        |                                        |",
		13: "4KiB -> 8KiB  : 3        |****************************************|",
		14: "8KiB -> 16KiB : 1        |*************                           |",
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], w)
		}
	}
}

func TestSlotLabelTop(t *testing.T) {
	if got := slotLabel(64, Bytes); got != "16EiB" {
		t.Errorf("slotLabel(64, Bytes) = %q", got)
	}
	if got := slotLabel(64, Time); got != "17179869184s" {
		t.Errorf("slotLabel(64, Time) = %q", got)
	}
}

func TestFormatDuration(t *testing.T) {
	cases := []struct {
		ns   uint64
		want string
	}{
		{0, "0ns"},
		{812, "812ns"},
		{999, "999ns"},
		{1000, "1us"},
		{3400, "3.4us"},
		{3456, "3.46us"},
		{999_400, "999us"},
		{999_600, "1ms"}, // rounds up into the next unit
		{12_100_000, "12.1ms"},
		{12_149_000, "12.1ms"},
		{1_520_000_000, "1.52s"},
		{60_000_000_000, "60s"},
		{999_999_999_999, "1000s"},
		{3_600_000_000_000, "3600s"},
		{math.MaxUint64, "18446744074s"},
	}
	for _, c := range cases {
		if got := FormatDuration(c.ns); got != c.want {
			t.Errorf("FormatDuration(%d) = %q, want %q", c.ns, got, c.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	cases := []struct {
		b    uint64
		want string
	}{
		{0, "0B"},
		{512, "512B"},
		{1023, "1023B"},
		{1024, "1.0KiB"},
		{8192, "8.0KiB"},
		{3 << 20, "3.0MiB"},
		{3250585, "3.1MiB"},
		{1<<20 - 1, "1.0MiB"}, // not "1024.0KiB"
		{1288490189, "1.2GiB"},
		{math.MaxUint64, "16.0EiB"},
	}
	for _, c := range cases {
		if got := FormatBytes(c.b); got != c.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", c.b, got, c.want)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	var h Hist
	for _, v := range []uint64{0, 1, 5, 1500, 1500, 1_000_000, math.MaxUint64 - 5} {
		h.Add(v)
	}
	data, err := json.Marshal(h) // by value: must still use MarshalJSON
	if err != nil {
		t.Fatal(err)
	}
	var back Hist
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back != h {
		t.Errorf("round trip changed histogram:\n%s", data)
	}

	var small Hist
	small.Add(1500)
	small.Add(1600)
	data, _ = json.Marshal(&small)
	want := `{"count":2,"sum":3100,"buckets":[{"lo":1024,"hi":2048,"count":2}]}`
	if string(data) != want {
		t.Errorf("json = %s, want %s", data, want)
	}
	data, _ = json.Marshal(Hist{})
	if string(data) != `{"count":0,"sum":0,"buckets":[]}` {
		t.Errorf("empty json = %s", data)
	}

	// Unmarshal replaces earlier contents.
	if err := json.Unmarshal([]byte(want), &back); err != nil || back != small {
		t.Errorf("unmarshal into used hist: %v, %+v", err, back)
	}

	bad := []string{
		`{"count":1,"sum":0,"buckets":[{"lo":1000,"hi":2000,"count":1}]}`,                     // not a slot
		`{"count":2,"sum":0,"buckets":[{"lo":2,"hi":4,"count":1},{"lo":2,"hi":4,"count":1}]}`, // duplicate
		`{"count":5,"sum":0,"buckets":[{"lo":2,"hi":4,"count":1}]}`,                           // count mismatch
		`{"count":"x"}`, // malformed
	}
	for _, s := range bad {
		if err := json.Unmarshal([]byte(s), &back); err == nil {
			t.Errorf("Unmarshal(%s) succeeded, want error", s)
		}
	}
}
