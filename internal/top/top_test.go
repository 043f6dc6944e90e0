package top

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

const pgbenchSelect = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"

// query is a finished query: ms of time, split cpu/io wait/lock/other as
// given in ms, with fs calls and block requests.
func query(fp, text string, pid int, db, user string, cpu, io, lock, other float64, fs, blk uint64) *model.Query {
	ns := func(ms float64) uint64 { return uint64(ms * 1e6) }
	q := &model.Query{Type: "query", Statements: 1, TS: t0, PID: pid, Role: "client backend", Database: db, User: user,
		Fingerprint: fp, Query: text, QueryNs: ns(cpu + io + lock + other),
		CPUNs: ns(cpu), IOWaitNs: ns(io), LockNs: ns(lock), OtherWaitNs: ns(other), BlkCount: blk}
	q.FSReadCount = fs
	return q
}

func started(servers string) *Aggregator {
	a := New()
	a.Start(servers, t0)
	return a
}

func interval(seconds float64, queries uint64) *model.Interval {
	return &model.Interval{Type: "interval", TS: t0.Add(10 * time.Second), Seconds: seconds, Queries: queries,
		Drops: model.Drops{"ringbuf_full": 0, "blk_merges": 7},
		Rates: []model.Rate{{Layer: "fs", Role: "client backend", ReadOps: 100, ReadBytes: 819200, AvgNs: 2000},
			{Layer: "blk", Role: "checkpointer", Device: "vda", WriteOps: 10, WriteBytes: 81920, AvgNs: 50000}}}
}

// workload: two fingerprints on two databases, three backends.
func workload(a *Aggregator) {
	for range 3 { // pid 10 on shop: 3 selects of 2 ms (1 cpu, 1 io)
		a.Observe(query("aaaa", pgbenchSelect, 10, "shop", "app", 1, 1, 0, 0, 2, 1))
	}
	a.Observe(query("bbbb", "UPDATE t SET x = $1", 11, "shop", "app", 1, 0, 9, 0, 0, 0)) // 10 ms, 9 of lock
	nightly := query("aaaa", pgbenchSelect, 12, "crm", "batch", 4, 0, 0, 0, 0, 0)        // 4 ms of cpu
	nightly.Application = "nightly job"
	a.Observe(nightly)
}

func frame(t *testing.T, a *Aggregator, sort string, f Filter) (*Frame, *View) {
	t.Helper()
	v, err := NewView(sort, f)
	if err != nil {
		t.Fatal(err)
	}
	return v.Frame(a.Tick(interval(2, 5))), v
}

func boxNs(r *Row, name string) uint64 {
	return r.BoxNs[slices.IndexFunc(model.Boxes, func(b model.Box) bool { return b.Name == name })]
}

func TestAggregate(t *testing.T) {
	a := started("PostgreSQL pid 1 (/data)")
	workload(a)
	f, _ := frame(t, a, "total", Filter{})
	if f.Type != "top" || f.Queries != 5 || f.QueriesPerSec != 2.5 || f.Seconds != 2 || !f.Since.Equal(t0) || f.Servers != "PostgreSQL pid 1 (/data)" {
		t.Errorf("frame header: %+v", f)
	}
	if len(f.Fingerprints) != 2 || len(f.Backends) != 3 || len(f.Rates) != 2 {
		t.Fatalf("%d fingerprints, %d backends, %d rates", len(f.Fingerprints), len(f.Backends), len(f.Rates))
	}
	sel := f.Fingerprints[0] // 3×2 + 4 = 10 ms, as the update's 10: "aaaa" first by fingerprint
	if sel.Fingerprint != "aaaa" || sel.Query != pgbenchSelect || sel.Calls != 4 || sel.CallsPerSec != 2 ||
		sel.TotalNs != 10e6 || sel.MeanNs != 2.5e6 || boxNs(&sel, "cpu_ns") != 7e6 || boxNs(&sel, "io_wait_ns") != 3e6 ||
		sel.FSCount != 6 || sel.BlkCount != 3 {
		t.Errorf("the select's row: %+v", sel)
	}
	upd := f.Fingerprints[1]
	if upd.Fingerprint != "bbbb" || upd.Calls != 1 || upd.TotalNs != 10e6 || boxNs(&upd, "lock_ns") != 9e6 {
		t.Errorf("the update's row: %+v", upd)
	}
	want := map[int]struct {
		calls      uint64
		db, lastFP string
	}{10: {3, "shop", "aaaa"}, 11: {1, "shop", "bbbb"}, 12: {1, "crm", "aaaa"}}
	for _, b := range f.Backends {
		w := want[b.PID]
		if b.Calls != w.calls || b.Database != w.db || b.Fingerprint != w.lastFP || b.Role != "client backend" {
			t.Errorf("backend %d: %+v, want %+v", b.PID, b, w)
		}
	}
	// The next interval starts empty; the recent queries stay.
	next := (&View{Sort: "total"}).Frame(a.Tick(interval(1, 0)))
	if len(next.Fingerprints) != 0 || len(next.Backends) != 0 {
		t.Errorf("an idle interval has rows: %+v", next)
	}
	if got := len(a.Recent("aaaa")); got != 4 {
		t.Errorf("%d recent queries of the select kept, want 4", got)
	}
}

func TestBoxColumnsCoverEveryBox(t *testing.T) {
	seen := map[string]int{}
	for _, c := range boxColumns {
		for _, b := range c.boxes {
			seen[b]++
		}
	}
	for _, b := range model.Boxes {
		if seen[b.Name] != 1 {
			t.Errorf("box %s is in %d of top's columns, want 1", b.Name, seen[b.Name])
		}
	}
	if len(seen) != len(model.Boxes) {
		t.Errorf("top's columns name %d boxes, the catalog has %d", len(seen), len(model.Boxes))
	}
}

func TestSort(t *testing.T) {
	a := started("x")
	// Three fingerprints: many fast calls; one slow call all in I/O; a
	// middle one with the most I/O time but a smaller share of it.
	for range 10 {
		a.Observe(query("many", "SELECT 1", 1, "d", "u", 1, 0, 0, 0, 0, 0))
	}
	a.Observe(query("slow", "SELECT slow", 2, "d", "u", 0, 5, 0, 0, 0, 0))
	a.Observe(query("iomost", "SELECT io", 3, "d", "u", 10, 8, 0, 0, 0, 0))
	snap := a.Tick(interval(1, 12))
	for _, tc := range []struct {
		sort    string
		reverse bool
		want    []string
	}{
		{"total", false, []string{"iomost", "many", "slow"}},
		{"calls", false, []string{"many", "iomost", "slow"}}, // ties: the most total time
		{"mean", false, []string{"iomost", "slow", "many"}},
		{"mean", true, []string{"many", "slow", "iomost"}},
		{"io", false, []string{"iomost", "slow", "many"}}, // by I/O wait time, not its share
		{"query", false, []string{"many", "iomost", "slow"}},
		{"query", true, []string{"slow", "iomost", "many"}},
		{"pid", false, []string{"iomost", "many", "slow"}}, // the fingerprints lack it: by total
	} {
		v, err := NewView(tc.sort, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		v.Reverse = tc.reverse
		var got []string
		for _, r := range v.Frame(snap).Fingerprints {
			got = append(got, r.Fingerprint)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("sort %s reverse %v: %v, want %v", tc.sort, tc.reverse, got, tc.want)
		}
	}
	v, _ := NewView("pid", Filter{})
	var pids []int
	for _, r := range v.Frame(snap).Backends {
		pids = append(pids, r.PID)
	}
	if !slices.Equal(pids, []int{3, 2, 1}) {
		t.Errorf("backends by pid: %v", pids)
	}
	if _, err := NewView("nope", Filter{}); err == nil || !strings.Contains(err.Error(), "calls/s") {
		t.Errorf("an unknown sort column: %v", err)
	}
}

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		filter       Filter
		calls        map[string]uint64 // fingerprint -> calls
		backendCalls uint64
		rates        int
	}{
		{Filter{}, map[string]uint64{"aaaa": 4, "bbbb": 1}, 5, 2},
		{Filter{Database: "shop"}, map[string]uint64{"aaaa": 3, "bbbb": 1}, 4, 2},
		{Filter{Database: "crm"}, map[string]uint64{"aaaa": 1}, 1, 2},
		{Filter{User: "batch"}, map[string]uint64{"aaaa": 1}, 1, 2},
		{Filter{Database: "shop", User: "batch"}, map[string]uint64{}, 0, 2},
		{Filter{Application: "nightly job"}, map[string]uint64{"aaaa": 1}, 1, 2},
		{Filter{Database: "shop", Application: "nightly job"}, map[string]uint64{}, 0, 2},
		{Filter{Role: "client backend"}, map[string]uint64{"aaaa": 4, "bbbb": 1}, 5, 1},
		{Filter{Role: "checkpointer"}, map[string]uint64{}, 0, 1},
	} {
		a := started("x")
		workload(a)
		f, _ := frame(t, a, "total", tc.filter)
		got := map[string]uint64{}
		for _, r := range f.Fingerprints {
			got[r.Fingerprint] = r.Calls
		}
		var be uint64
		for _, r := range f.Backends {
			be += r.Calls
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.calls) || be != tc.backendCalls || len(f.Rates) != tc.rates {
			t.Errorf("filter %+v: fingerprints %v, backends %d calls, %d rates; want %v, %d, %d", tc.filter, got, be, len(f.Rates), tc.calls, tc.backendCalls, tc.rates)
		}
	}
}

func TestParseFilter(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Filter
		err  bool
	}{
		{"", Filter{}, false},
		{"database=shop", Filter{Database: "shop"}, false},
		{" db=shop user=app ", Filter{Database: "shop", User: "app"}, false},
		{"role=client backend user=app", Filter{User: "app", Role: "client backend"}, false},
		{"app=nightly job db=crm", Filter{Database: "crm", Application: "nightly job"}, false},
		{"application=psql", Filter{Application: "psql"}, false},
		{"shop", Filter{}, true},
		{"x database=shop", Filter{}, true},
	} {
		got, err := ParseFilter(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseFilter(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.err)
		}
		if !tc.err {
			if again, _ := ParseFilter(got.String()); again != got {
				t.Errorf("%+v does not read back from %q: %+v", got, got.String(), again)
			}
		}
	}
}

func TestRecentBounded(t *testing.T) {
	a := started("x")
	for i := range 50 {
		q := query("aaaa", pgbenchSelect, 100+i, "d", "u", 1, 0, 0, 0, 0, 0)
		q.Waits = map[string]uint64{"IO/DataFileRead": 1}
		a.Observe(q)
	}
	// --raw-sql: each text differs; the kept ones are cut.
	a.Observe(query("raw", "SELECT 1", 1, "d", "u", 1, 0, 0, 0, 0, 0))
	a.Observe(query("raw", "SELECT '"+strings.Repeat("é", 1000)+"'", 1, "d", "u", 1, 0, 0, 0, 0, 0))
	a.Observe(query("raw", "SELECT 2", 1, "d", "u", 1, 0, 0, 0, 0, 0))
	rs := a.Recent("aaaa")
	if len(rs) != RecentKept {
		t.Fatalf("%d recent queries kept, want %d", len(rs), RecentKept)
	}
	for i, q := range rs { // the newest first: pids 149 down to 130
		if q.PID != 149-i || q.Waits != nil || q.Query != pgbenchSelect {
			t.Errorf("recent %d: pid %d waits %v query %q", i, q.PID, q.Waits, q.Query)
		}
	}
	raw := a.Recent("raw")
	if len(raw) != 3 || raw[0].Query != "SELECT 2" || raw[2].Query != "SELECT 1" || len(raw[1].Query) > recentTextMax+3 ||
		!strings.HasSuffix(raw[1].Query, "é...") || !utf8.ValidString(raw[1].Query) {
		t.Errorf("raw texts kept: %d, %q, %d bytes", len(raw), raw[0].Query, len(raw[1].Query))
	}
	if a.Recent("none") != nil {
		t.Errorf("a fingerprint never seen has recent queries")
	}
}

// Distinct fingerprints beyond every bound: the recent queries of at most
// maxFingerprints are kept, the busiest; the rows of an interval stop at
// maxRows and count the rest.
func TestBounds(t *testing.T) {
	a := started("x")
	busy := func(i int) { // the same 50 fingerprints, busy every interval
		a.Observe(query(fmt.Sprintf("busy%d", i%50), "SELECT busy", 1, "d", "u", 100, 0, 0, 0, 0, 0))
	}
	for round := range 5 {
		for i := range 3000 {
			a.Observe(query(fmt.Sprintf("r%d-%d", round, i), "SELECT 1", 1, "d", "u", 1, 0, 0, 0, 0, 0))
			if i%10 == 0 {
				busy(i / 10)
			}
			if len(a.recents) > maxFingerprints {
				t.Fatalf("%d fingerprints' queries kept", len(a.recents))
			}
		}
		snap := a.Tick(interval(1, 3300))
		if len(a.recents) > maxFingerprints-newcomers {
			t.Errorf("after interval %d: %d fingerprints' queries kept, want at most %d", round, len(a.recents), maxFingerprints-newcomers)
		}
		if len(snap.Cells) != 3050 {
			t.Errorf("interval %d: %d cells, want 3050", round, len(snap.Cells))
		}
	}
	for i := range 50 {
		if a.Recent(fmt.Sprintf("busy%d", i)) == nil {
			t.Errorf("busy%d's queries were evicted", i)
		}
	}
	for i := range maxRows + 500 {
		a.Observe(query(fmt.Sprintf("flood%d", i), "SELECT 1", 1000+i, "d", "u", 1, 0, 0, 0, 0, 0))
	}
	snap := a.Tick(interval(1, maxRows+500))
	if len(snap.Cells) != maxRows || snap.UnlistedFingerprints != 500 || len(snap.Backends) != maxRows || snap.UnlistedBackends != 500 {
		t.Errorf("a flood: %d cells, %d unlisted; %d backends, %d unlisted", len(snap.Cells), snap.UnlistedFingerprints, len(snap.Backends), snap.UnlistedBackends)
	}
	f := (&View{Sort: "total"}).Frame(snap)
	if lines := Render(f, &View{Sort: "total"}, nil, 120, 0); !slices.ContainsFunc(lines, func(l Line) bool {
		return strings.Contains(l.Text, "+ 500 queries not listed")
	}) {
		t.Errorf("the plain output does not say queries were left out")
	}
}

func TestKeys(t *testing.T) {
	a := started("x")
	workload(a)
	snap := a.Tick(interval(2, 5))
	v, _ := NewView("total", Filter{})
	v.Frame(snap)
	press := func(keys ...Key) Action {
		act := Redraw
		for _, k := range keys {
			act = v.Key(k)
			v.Frame(snap) // as the screen redraws after each key
		}
		return act
	}
	r := func(c rune) Key { return Key{Rune: c} }
	typed := func(s string) []Key {
		var ks []Key
		for _, c := range s {
			ks = append(ks, r(c))
		}
		return ks
	}
	if v.Selected() != "aaaa" {
		t.Errorf("selected %q at first, want the first row", v.Selected())
	}
	press(r('>'))
	if v.Sort != "mean" {
		t.Errorf("> moved the sort to %s, want mean", v.Sort)
	}
	press(Key{Special: Left}, Key{Special: Left})
	if v.Sort != "calls/s" {
		t.Errorf("two lefts moved it to %s, want calls/s", v.Sort)
	}
	press(r('<'), r('<'), r('<'), r('<'), r('<'))
	if v.Sort != "query" {
		t.Errorf("the sort does not wrap around: %s", v.Sort)
	}
	press(r('r'))
	if !v.Reverse {
		t.Errorf("r does not reverse")
	}
	press(r('f'))
	if !v.Frozen {
		t.Errorf("f does not freeze")
	}
	press(r(' '))
	if v.Frozen {
		t.Errorf("space does not go on")
	}
	press(append(append([]Key{r('/')}, typed("db=shop user=app")...), Key{Special: Enter})...)
	if v.Filter != (Filter{Database: "shop", User: "app"}) {
		t.Errorf("the filter prompt gave %+v", v.Filter)
	}
	press(append(append([]Key{r('d'), {Special: Backspace}, {Special: Backspace}, {Special: Backspace}, {Special: Backspace}}, typed("crm")...), Key{Special: Enter})...)
	if v.Filter != (Filter{Database: "crm", User: "app"}) {
		t.Errorf("the database prompt gave %+v", v.Filter)
	}
	press(append(append([]Key{r('a')}, typed("nightly job")...), Key{Special: Enter})...)
	if v.Filter != (Filter{Database: "crm", User: "app", Application: "nightly job"}) {
		t.Errorf("the application prompt gave %+v", v.Filter)
	}
	press(append([]Key{r('a')}, slices.Repeat([]Key{{Special: Backspace}}, 11)...)...)
	press(Key{Special: Enter})
	press(append([]Key{r('R')}, typed("walsender")...)...)
	if act := press(Key{Special: Esc}); act != Redraw || v.Filter.Role != "" {
		t.Errorf("Esc does not cancel a prompt: %v %+v", act, v.Filter)
	}
	clear := slices.Repeat([]Key{{Special: Backspace}}, 40)
	press(append(append(append([]Key{r('/')}, clear...), typed("nonsense")...), Key{Special: Enter})...)
	if v.Status == "" || v.Filter != (Filter{Database: "crm", User: "app"}) {
		t.Errorf("a bad filter: status %q, filter %+v", v.Status, v.Filter)
	}
	press(r('u'), Key{Special: Backspace}, Key{Special: Backspace}, Key{Special: Backspace}, Key{Special: Enter}, r('d'),
		Key{Special: Backspace}, Key{Special: Backspace}, Key{Special: Backspace}, Key{Special: Enter})
	if v.Filter != (Filter{}) {
		t.Errorf("emptied prompts leave %+v", v.Filter)
	}
	// Sorted by query text reversed: UPDATE, then SELECT.
	press(Key{Special: Down})
	if v.Selected() != "aaaa" {
		t.Errorf("down selected %q, want the select", v.Selected())
	}
	press(Key{Special: Down}, Key{Special: Down})
	if v.Selected() != "aaaa" {
		t.Errorf("down past the last row selected %q", v.Selected())
	}
	press(Key{Special: Enter})
	if !v.Detail {
		t.Errorf("Enter does not show the slow log")
	}
	if act := press(r('r')); act != Redraw || !v.Detail {
		t.Errorf("r in the slow log: %v, detail %v", act, v.Detail)
	}
	press(Key{Special: Esc})
	if v.Detail {
		t.Errorf("Esc does not leave the slow log")
	}
	press(r('l'))
	if !v.Detail {
		t.Errorf("l does not show the slow log")
	}
	press(r('l'))
	for _, k := range []Key{r('q'), {Special: Esc}, {Special: CtrlC}} {
		w, _ := NewView("total", Filter{})
		if w.Key(k) != Quit {
			t.Errorf("%+v does not quit", k)
		}
	}
	v.Key(r('/'))
	if v.Key(r('q')) != Redraw || v.Key(Key{Special: CtrlC}) != Quit {
		t.Errorf("in a prompt, q is typed and Ctrl-C quits")
	}
}

func TestRender(t *testing.T) {
	a := started("PostgreSQL pid 1 (/data)")
	workload(a)
	snap := a.Tick(interval(2, 5))
	snap.Drops = model.Drops{"ringbuf_full": 3, "blk_merges": 9}
	v, _ := NewView("total", Filter{})
	f := v.Frame(snap)
	lines := Render(f, v, nil, 120, 0)
	text := ""
	for _, l := range lines {
		if n := utf8.RuneCountInString(l.Text); n > 120 {
			t.Errorf("a line of %d characters: %q", n, l.Text)
		}
		text += l.Text + "\n"
	}
	for _, want := range []string{
		"dbiolat top: PostgreSQL pid 1 (/data)",
		"interval 2.00s  2.5 queries/s  traced since 03:04:05 (10s)",
		"DROPPED: 3 query records (ring buffer full)",
		" CALLS CALLS/S vTOTAL   MEAN  CPU RUNQ   IO LOCK OTHER    FS   BLK QUERY",
		"     4     2.0   10ms  2.5ms  70%   0%  30%   0%    0%     6     3 " + pgbenchSelect + "\n",
		"     1     0.5   10ms   10ms  10%   0%   0%  90%    0%     0     0 UPDATE t SET x = $1\n",
		"     PID USER@DB          APP        CALLS CALLS/S vTOTAL",
		"      10 app@shop                        3     1.5    6ms    2ms  50%   0%  50%   0%    0%     6     3 " + pgbenchSelect[:17] + "\n",
		"      12 batch@crm        nightly jo     1     0.5    4ms    4ms 100%   0%   0%   0%    0%     0     0 " + pgbenchSelect[:17] + "\n",
		output.RatesHeader(),
		output.RateLine(&f.Rates[0]),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the plain output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "blk_merges") || strings.Contains(text, "bios merged") || strings.ContainsRune(text, 0x1b) {
		t.Errorf("notes or escape codes in the plain output:\n%s", text)
	}

	// A screen: exactly its height, the keys last, the selection marked,
	// the sort's mark moved and turned by the keys.
	v.Key(Key{Special: Down})
	v.Key(Key{Rune: '>'})
	v.Key(Key{Rune: 'r'})
	f = v.Frame(snap)
	lines = Render(f, v, nil, 160, 30)
	if len(lines) != 30 || lines[29].Text != Help || lines[29].Style != Dim || lines[0].Style != Title || lines[2].Style != Alert {
		t.Errorf("a 30-line screen: %d lines, last %+v", len(lines), lines[len(lines)-1])
	}
	var selected []string
	for _, l := range lines {
		if l.Style == Selected {
			selected = append(selected, l.Text)
		}
		if l.Style == Header && strings.Contains(l.Text, "CALLS") && !strings.Contains(l.Text, "^MEAN") {
			t.Errorf("the header does not mark the reversed mean: %q", l.Text)
		}
	}
	// By mean, ascending: the select (2.5 ms) first, the update second, selected.
	if len(selected) != 1 || !strings.HasSuffix(selected[0], "UPDATE t SET x = $1") {
		t.Errorf("selected lines: %q", selected)
	}
	// A small screen still ends with the keys, and scrolls to the selection.
	lines = Render(f, v, nil, 160, 14)
	if len(lines) != 14 || lines[13].Text != Help || !slices.ContainsFunc(lines, func(l Line) bool { return l.Style == Selected }) {
		t.Errorf("a 14-line screen:\n%v", lines)
	}

	// The slow log of the selection.
	v.Key(Key{Special: Enter})
	recent := a.Recent(v.Selected())
	lines = Render(v.Frame(snap), v, recent, 160, 30)
	text = ""
	for _, l := range lines {
		text += l.Text + "\n"
	}
	for _, want := range []string{
		"fingerprint bbbb: 1 calls (0.5/s), total 10ms, mean 10ms, fs 0, blk 0 in the interval",
		"its last 1 queries (of 20 kept), the newest first:",
		output.SlowLine(&recent[0]),
		"Esc back  q quit  f freeze",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the slow log view lacks %q:\n%s", want, text)
		}
	}
	// A prompt is the last line.
	v.Key(Key{Special: Esc})
	v.Key(Key{Rune: 'd'})
	v.Key(Key{Rune: 'x'})
	lines = Render(v.Frame(snap), v, nil, 160, 30)
	if last := lines[len(lines)-1]; last.Style != Prompt || last.Text != "database (empty: any): x" {
		t.Errorf("the prompt line: %+v", last)
	}
}

// At 120 columns, the plain width, pgbench's query shows whole.
func TestQueryColumnWidth(t *testing.T) {
	a := started("x")
	a.Observe(query("aaaa", pgbenchSelect+" AND x", 1, "d", "u", 1, 0, 0, 0, 0, 0))
	v := &View{Sort: "total"}
	for _, l := range Render(v.Frame(a.Tick(interval(1, 1))), v, nil, 120, 0) {
		if strings.HasPrefix(l.Text, "     1") {
			if !strings.HasSuffix(l.Text, pgbenchSelect+" ") || utf8.RuneCountInString(l.Text) != 120 {
				t.Errorf("the query column at 120: %q", l.Text)
			}
			return
		}
	}
	t.Errorf("no row")
}

func TestWrap(t *testing.T) {
	got := wrap("abcdefghijklmnop", 8)
	if !slices.Equal(got, []string{"abcdefgh", "    ijkl", "    mnop"}) {
		t.Errorf("wrap: %q", got)
	}
	for _, tc := range []struct {
		n    uint64
		want string
	}{{0, "0"}, {99999, "99999"}, {100000, "100k"}, {9999999, "9999k"}, {12345678, "12.3M"}} {
		if got := count(tc.n); got != tc.want {
			t.Errorf("count(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestFrameJSON(t *testing.T) {
	a := started("PostgreSQL pid 1 (/data)")
	workload(a)
	f, _ := frame(t, a, "total", Filter{Database: "shop"})
	var b strings.Builder
	if err := output.NewJSON(&b).Write(f); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Type         string
		Filter       Filter
		Fingerprints []map[string]any
		Backends     []map[string]any
		Rates        []model.Rate
		Drops        model.Drops
	}
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	if got.Type != "top" || got.Filter.Database != "shop" || len(got.Fingerprints) != 2 || len(got.Backends) != 2 || len(got.Rates) != 2 || got.Drops["blk_merges"] != 7 {
		t.Fatalf("the JSON frame: %s", b.String())
	}
	fp := got.Fingerprints[1] // on shop the update's 10 ms come first
	for name, want := range map[string]any{"fingerprint": "aaaa", "query": pgbenchSelect, "calls": 3.0, "total_ns": 6e6,
		"cpu_ns": 3e6, "io_wait_ns": 3e6, "lock_ns": 0.0, "unaccounted_ns": 0.0, "fs_count": 6.0, "blk_count": 3.0} {
		if fp[name] != want {
			t.Errorf("%s = %v, want %v (%v)", name, fp[name], want, fp)
		}
	}
	if _, ok := fp["BoxNs"]; ok || got.Backends[0]["pid"] == nil {
		t.Errorf("rows in JSON: %v", got)
	}
}

// A row names PostgreSQL's query id of its queries when they share one: a
// fingerprint run in two databases has two (the ids cover the relations'
// OIDs) and shows none, unless a filter keeps one database; a query with
// no id does not hide its fingerprint's; a backend's is its last query's.
func TestQueryIDInRows(t *testing.T) {
	a := started("PostgreSQL pid 1 (/data)")
	for i := range 3 {
		q := query("aaaa", pgbenchSelect, 10, "shop", "app", 1, 1, 0, 0, 2, 1)
		if i > 0 { // the first had none (compute_query_id was off, say)
			q.QueryID = 111
		}
		a.Observe(q)
	}
	upd := query("bbbb", "UPDATE t SET x = $1", 11, "shop", "app", 1, 0, 9, 0, 0, 0)
	upd.QueryID = -333
	a.Observe(upd)
	nightly := query("aaaa", pgbenchSelect, 12, "crm", "batch", 4, 0, 0, 0, 0, 0)
	nightly.QueryID = 222
	a.Observe(nightly)
	snap := a.Tick(interval(2, 5))

	ids := func(rows []Row, key func(Row) string) map[string]int64 {
		m := map[string]int64{}
		for _, r := range rows {
			m[key(r)] = r.QueryID
		}
		return m
	}
	byFP := func(r Row) string { return r.Fingerprint }
	byPID := func(r Row) string { return fmt.Sprint(r.PID) }
	for _, c := range []struct {
		filter   Filter
		fps, pid map[string]int64
	}{
		{Filter{}, map[string]int64{"aaaa": 0, "bbbb": -333}, map[string]int64{"10": 111, "11": -333, "12": 222}},
		{Filter{Database: "shop"}, map[string]int64{"aaaa": 111, "bbbb": -333}, map[string]int64{"10": 111, "11": -333}},
		{Filter{Database: "crm"}, map[string]int64{"aaaa": 222}, map[string]int64{"12": 222}},
	} {
		v, err := NewView("total", c.filter)
		if err != nil {
			t.Fatal(err)
		}
		f := v.Frame(snap)
		if got := ids(f.Fingerprints, byFP); !maps.Equal(got, c.fps) {
			t.Errorf("filter %+v: fingerprints' query ids %v, want %v", c.filter, got, c.fps)
		}
		if got := ids(f.Backends, byPID); !maps.Equal(got, c.pid) {
			t.Errorf("filter %+v: backends' query ids %v, want %v", c.filter, got, c.pid)
		}
	}
	b, err := json.Marshal(Row{Fingerprint: "bbbb", QueryID: -8_716_437_223_111_042_003})
	if err != nil || !strings.Contains(string(b), `"queryid":-8716437223111042003,`) {
		t.Errorf("a row's JSON: %s, %v", b, err)
	}
	if b, _ := json.Marshal(Row{Fingerprint: "aaaa"}); strings.Contains(string(b), "queryid") {
		t.Errorf("a row without a query id has one in JSON: %s", b)
	}
}

// With the kernel counting by statement: a fingerprint's calls are its
// statements' counts plus the records no identity counted, never a
// counted record again; a backend whose queries the kernel counted has
// the kernel's calls and I/O and no time ("-"), one whose queries all
// came as records keeps its row; its last query is the last recorded,
// kept into the next interval.
func TestKernelCounted(t *testing.T) {
	a := started("PostgreSQL pid 1")
	sums := query("aaaa", pgbenchSelect, 0, "shop", "app", 30, 10, 0, 0, 5, 2)
	sums.Statements, sums.Counted = 20, true
	slow := query("aaaa", pgbenchSelect, 10, "shop", "app", 12, 0, 0, 0, 0, 0) // one of the 20, recorded as slow
	slow.Counted = true
	a.Observe(slow)
	a.Observe(query("bbbb", "UPDATE t SET x = $1", 11, "shop", "app", 1, 0, 0, 0, 0, 0)) // not counted in the kernel
	a.AddStatements([]model.StatementCounts{{Sums: sums}})
	a.AddBackends([]model.BackendCounts{
		{PID: 10, Role: "client backend", Database: "shop", User: "app", Queries: 20, FSCount: 7, BlkCount: 3,
			Time: &model.Query{QueryNs: 40e6, CPUNs: 30e6, IOWaitNs: 10e6}},
		{PID: 11, Role: "client backend", Database: "shop", User: "app", Queries: 1},
		{PID: 12, Role: "client backend", Database: "crm", User: "batch", FSCount: 4}, // I/O, no query begun: a long one
	})
	v, _ := NewView("total", Filter{Role: "client backend"})
	f := v.Frame(a.Tick(interval(1, 21)))
	calls := map[string]uint64{}
	for _, r := range f.Fingerprints {
		calls[r.Fingerprint] = r.Calls
	}
	if calls["aaaa"] != 20 || calls["bbbb"] != 1 || len(calls) != 2 {
		t.Errorf("fingerprints' calls %v, want aaaa 20 (the kernel's, the slow record not again) and bbbb 1", calls)
	}
	byPID := map[int]Row{}
	for _, r := range f.Backends {
		byPID[r.PID] = r
	}
	if r := byPID[10]; !r.KernelCounted || r.Calls != 20 || r.FSCount != 7 || r.BlkCount != 3 || r.TotalNs != 40e6 || r.MeanNs != 2e6 || r.Query != pgbenchSelect {
		t.Errorf("backend 10: %+v", r)
	}
	if r := byPID[11]; r.KernelCounted || r.Calls != 1 || r.TotalNs != 1e6 {
		t.Errorf("backend 11, its query a record: %+v", r)
	}
	if r := byPID[12]; !r.KernelCounted || r.Calls != 0 || r.FSCount != 4 || r.Database != "crm" {
		t.Errorf("backend 12: %+v", r)
	}
	var text string
	for _, l := range Render(f, v, nil, 160, 0) {
		text += l.Text + "\n"
	}
	if !regexp.MustCompile(`(?m)^ +10 app@shop +20 +20\.0 +40ms +2ms +75% +0% +25% `).MatchString(text) {
		t.Errorf("backend 10's row does not show its time, mean and boxes:\n%s", text)
	}
	// The next interval: the kernel's figures alone; the last query stays.
	a.AddBackends([]model.BackendCounts{{PID: 10, Role: "client backend", Database: "shop", User: "app", Queries: 5}})
	f = v.Frame(a.Tick(interval(1, 5)))
	if len(f.Backends) != 1 || f.Backends[0].Query != pgbenchSelect || f.Backends[0].Calls != 5 {
		t.Errorf("the next interval's backends: %+v", f.Backends)
	}
}
