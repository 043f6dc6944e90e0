package output

import (
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
)

func TestSlowLine(t *testing.T) {
	q := &model.Query{Statements: 1,
		TS: time.Date(2026, 11, 22, 1, 52, 2, 512e6, time.UTC), PID: 15311, Role: "client backend",
		User: "postgres", Database: "bench", Query: "SELECT count(*) FROM t WHERE a >= $1",
		QueryNs: 328e6, FSTotals: model.FSTotals{FSReadCount: 12778, FSReadBytes: 104_660_992, FSReadNs: 261e6,
			FSReadMissCount: 40, FSReadMissNs: 30e6},
		BlkCount: 40, BlkBytes: 109_150_208, BlkNs: 97.6e6, CPUNs: 300e6, IOWaitNs: 27.5e6, RunqNs: 0.5e6,
	}
	want := "01:52:02.512 pid 15311 postgres@bench query 328ms (cpu 300ms, runq 500us, io wait 27.5ms), fs 261ms (12778 I/O, 99.8MiB, 40 waited 30ms), blk 97.6ms (40 req, 104.1MiB) : SELECT count(*) FROM t WHERE a >= $1"
	if got := SlowLine(q); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}

	// Syncs are named; raw multi-line SQL stays on one line; a process
	// whose title was not seen shows its role.
	q = &model.Query{Statements: 1, TS: q.TS, PID: 7, Role: "client backend", Query: "INSERT INTO t\n\tVALUES (1)",
		FSTotals: model.FSTotals{FSWriteCount: 1, FSWriteBytes: 8192, FSWriteNs: 20e3, FSSyncCount: 1, FSSyncNs: 2e6}}
	got := SlowLine(q)
	for _, part := range []string{"pid 7 client backend ", "fs 2.02ms (2 I/O, 8.0KiB, 1 sync 2ms)", ": INSERT INTO t VALUES (1)"} {
		if !strings.Contains(got, part) {
			t.Errorf("%q lacks %q", got, part)
		}
	}
	// The application follows the session, quoted when it has spaces.
	for app, want := range map[string]string{"psql": "pid 7 client backend app=psql query ",
		`pgAdmin 4 - "DB"`: `pid 7 client backend app="pgAdmin 4 - \"DB\"" query `} {
		a := *q
		a.Application = app
		if line := SlowLine(&a); !strings.Contains(line, want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}
	// No block request of its own: no block part, whatever else it waited for.
	if strings.Contains(got, "blk") {
		t.Errorf("a query without block requests shows a block part: %q", got)
	}
	// A pipeline's statements whose replies went out together say so, and
	// how many failed; a suspended portal's round trip is a part.
	q.Statements, q.Failed = 40, 1
	if got := SlowLine(q); !strings.Contains(got, " query 0ns for 40 statements, 1 failed (cpu 0ns)") {
		t.Errorf("a group of statements: %q", got)
	}
	q.Statements, q.Failed = 0, 0
	if got := SlowLine(q); !strings.Contains(got, " query 0ns in part (cpu 0ns)") {
		t.Errorf("a suspended portal: %q", got)
	}
	// Its statement, ended by a later round trip (a Close, a commit).
	q.Statements, q.PortalsEnded = 1, 1
	if got := SlowLine(q); !strings.Contains(got, " query 0ns, ended with their portal (cpu 0ns)") {
		t.Errorf("a suspended portal ended: %q", got)
	}
}

// A CHECKPOINT's line once said "other wait 91.2ms" though its wait event
// was known: the box names the event that holds most of it, and only such
// an event (not an I/O or lock event, which have boxes of their own, nor
// one that holds only part of the box).
func TestSlowLineNamesOtherWait(t *testing.T) {
	q := &model.Query{Statements: 1, PID: 7, Role: "client backend", Query: "CHECKPOINT",
		QueryNs: 93e6, CPUNs: 1.5e6, IOWaitNs: 0.3e6, OtherWaitNs: 91.2e6,
		Waits: map[string]uint64{"IPC/CheckpointDone": 91.1e6, "IO/DataFileRead": 0.3e6, "IPC/CheckpointStart": 0.1e6}}
	if got := SlowLine(q); !strings.Contains(got, "(cpu 1.5ms, io wait 300us, other wait 91.2ms (IPC/CheckpointDone)) : CHECKPOINT") {
		t.Errorf("the other box does not name its event: %q", got)
	}
	// An I/O event larger than the box is not the box's.
	q.Waits = map[string]uint64{"IO/DataFileRead": 200e6, "Client/ClientRead": 10e6}
	if got := SlowLine(q); !strings.Contains(got, "other wait 91.2ms) :") {
		t.Errorf("an event outside the box named it: %q", got)
	}
	// An event that holds half the box or less does not say what it was;
	// nor does the sum of the events a query did not keep by name.
	for _, waits := range []map[string]uint64{{"Timeout/PgSleep": 45.6e6}, {model.OtherWaitEvents: 91e6}, nil} {
		q.Waits = waits
		if got := SlowLine(q); !strings.Contains(got, "other wait 91.2ms) :") {
			t.Errorf("waits %v named the box: %q", waits, got)
		}
	}
	// MySQL's waits are named alike.
	q.Waits = map[string]uint64{"Lock/RowLock": 300e6, "Timeout/Sleep": 91e6}
	if got := SlowLine(q); !strings.Contains(got, "other wait 91.2ms (Timeout/Sleep))") {
		t.Errorf("MySQL's sleep: %q", got)
	}
}

// One wait of 91.1 ms prints its own value as every quantile, not its
// slot's (the histogram from the kernel carries its slot and sum).
func TestWaitHistsOneSleep(t *testing.T) {
	h := &hist.Hist{Sum: 91_100_000}
	h.AddSlot(hist.Slot(91_100_000), 1)
	var b strings.Builder
	if err := WaitHists(&b, model.Hists{"IPC/CheckpointDone": h}); err != nil {
		t.Fatal(err)
	}
	if want := "IPC/CheckpointDone: count 1, total 91.1ms, mean 91.1ms, p50 91.1ms, p99 91.1ms"; !strings.Contains(b.String(), want) {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestDropsText(t *testing.T) {
	if got := DropsText(model.Drops{}); got != "nothing dropped" {
		t.Errorf("no drops: %q", got)
	}
	got := DropsText(model.Drops{"ringbuf_full": 3, "blk_late": 2})
	if !strings.HasPrefix(got, "DROPPED: 3 query records (ring buffer full)") || !strings.Contains(got, "2 block requests still in flight when their query ended") {
		t.Errorf("got %q", got)
	}
	// Late completions are a note, not a loss.
	if got := DropsText(model.Drops{"blk_late": 2}); strings.Contains(got, "DROPPED") {
		t.Errorf("late completions reported as dropped: %q", got)
	}
	if n := (model.Drops{"ringbuf_full": 3, "blk_late": 2, "programs_skipped": 1}).Lost(); n != 4 {
		t.Errorf("lost %d, want 4: notes are not losses", n)
	}
}

func TestTree(t *testing.T) {
	q := &model.Query{Statements: 1, PID: 9, Role: "client backend", User: "u", Database: "d", Query: "SELECT 1",
		QueryNs: 100e6, CPUNs: 60e6, IOWaitNs: 30e6, OtherWaitNs: 10e6,
		FSTotals: model.FSTotals{FSReadCount: 10, FSReadBytes: 81920, FSReadNs: 35e6, FSReadMissCount: 3, FSReadMissNs: 31e6,
			FSReadHitCount: 7, FSReadHitNs: 4e6}, BlkCount: 3, BlkNs: 29e6}
	var b strings.Builder
	Tree(&b, q)
	out := OneLine(b.String()) // the columns' widths are not the point
	for _, want := range []string{"query 100ms", "├─ on CPU             60ms  60%", "├─ I/O wait            30ms  30%",
		"└─ unaccounted          0ns   0%", "7 page-cache hits 4ms, 3 misses 31ms", "block device        29ms busy with 3 requests"} {
		if !strings.Contains(out, OneLine(want)) {
			t.Errorf("tree lacks %q:\n%s", want, out)
		}
	}
}

func TestCompareVerdict(t *testing.T) {
	h := func(ns ...uint64) *hist.Hist {
		var x hist.Hist
		for _, v := range ns {
			x.Add(v)
		}
		return &x
	}
	fast := model.Hists{"fs_read": h(10e3, 12e3), "blk_read": h(100e3, 120e3)}
	for _, c := range []struct {
		name string
		b    model.Hists
		want string
	}{
		{"device slower", model.Hists{"fs_read": h(300e3, 350e3), "blk_read": h(1e6, 1.2e6)}, "arises at the block device"},
		{"above the device", model.Hists{"fs_read": h(300e3, 350e3), "blk_read": h(100e3, 110e3)}, "above the block device"},
		{"device faster, reads slower", model.Hists{"fs_read": h(300e3, 350e3), "blk_read": h(30e3, 40e3)}, "above the block device"},
		// A throttle adds milliseconds above a device that also had a bad
		// minute (its mean 5x): the device explains a fraction of it.
		{"throttled, device noisy", model.Hists{"fs_read": h(2.5e6, 2.6e6), "blk_read": h(500e3, 600e3)}, "above the block device"},
		{"alike", model.Hists{"fs_read": h(11e3, 12e3), "blk_read": h(100e3, 120e3)}, "alike"},
	} {
		if v := Compare(fast, c.b).Verdict; !strings.Contains(v, c.want) {
			t.Errorf("%s: verdict %q, want %q", c.name, v, c.want)
		}
	}
	// Recorded without --fs: the block device still compares.
	noFS := func(ns ...uint64) model.Hists { return model.Hists{"blk_read": h(ns...)} }
	if v := Compare(noFS(100e3), noFS(400e3)).Verdict; !strings.Contains(v, "block device reads 4.00x") || !strings.Contains(v, "--fs") {
		t.Errorf("without fs: verdict %q", v)
	}
}

// The export's line names each signal's records sent, and the losses
// apart from the choices.
func TestOTLPText(t *testing.T) {
	got := OTLPText([]model.OTLPCount{{Signal: "logs", Outcome: "sent", Count: 7}, {Signal: "logs", Outcome: "queue_full", Count: 2},
		{Signal: "logs", Outcome: "not_sampled", Count: 90}, {Signal: "traces", Outcome: "sent", Count: 9}})
	want := "otlp: logs 7 sent, 90 not sent (under --otlp-threshold and not drawn by --otlp-sample), " +
		"2 LOST (the queue to the collector full: it is slow or down); traces 9 sent"
	if got != want {
		t.Errorf("OTLPText:\n got %s\nwant %s", got, want)
	}
}

func TestPooled(t *testing.T) {
	for _, tc := range []struct {
		q    model.Query
		want string
	}{
		{model.Query{Via: "pgbouncer pid 42", ClientAddr: "127.0.0.1", ClientPort: 5678}, "from 127.0.0.1:5678 via pgbouncer pid 42"},
		{model.Query{Via: "pgbouncer pid 42", ClientAddr: "::1", ClientPort: 5678}, "from [::1]:5678 via pgbouncer pid 42"},
		{model.Query{Via: "pgbouncer pid 42", ClientPID: 99}, "from pid 99 via pgbouncer pid 42"},
		{model.Query{Via: "pgbouncer pid 42"}, "via pgbouncer pid 42"},
	} {
		if got := Pooled(&tc.q); got != tc.want {
			t.Errorf("Pooled(%+v) = %q, want %q", tc.q, got, tc.want)
		}
	}
}
