package main

// Papercuts of the kernel side, each against a real workload: the run-queue
// histogram holds only waits whose length is known, flushes behind fsyncs
// are seen whole, and a short trace has a BPF cost line.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Flushes behind fsyncs are seen whole. pgbench TPC-B commits, each an
// fdatasync of the WAL and so a cache flush on this disk (ext4 with
// barriers, a write-back cache), under a trace started before the load
// and without a duty cycle: the flush histogram counts the flushes, and
// blk_unseen only requests that were in flight when the trace attached,
// at most what the devices' queues hold (nr_requests each). Before the
// fix every flush was counted both ways: the flush machinery's own
// request passes block_io_done but never block_io_start.
func TestFlushesAreSeenWhole(t *testing.T) {
	sideBySide(t)
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	psql(t, c, "CHECKPOINT")
	tr := startTrace(t, "hist", "--json", "--pid", fmt.Sprint(c.PostmasterPID()))
	// A count of commits, not a time: one client, so no commit shares
	// another's WAL flush (group commit), and each is at least one cache
	// flush however slow the machine is this minute; 2,500 of them are
	// well over the queues' 1,280 requests.
	if _, err := c.Pgbench(ctx, "postgres", "-n", "-c", "1", "-t", "2500"); err != nil {
		t.Fatal(err)
	}
	_, _, sum := tr.stop(t)
	var flushes uint64
	if h := sum.Hists["blk_other"]; h != nil {
		flushes = h.Count
	}
	unseen, capacity := sum.Drops["blk_unseen"], queueCapacity(t)
	t.Logf("flushes %d, block requests not seen whole %d, the devices' queues hold %d", flushes, unseen, capacity)
	if flushes <= capacity {
		t.Fatalf("%d flushes in the TPC-B run, want more than the %d requests the queues hold, to tell them from those in flight at attach", flushes, capacity)
	}
	if unseen > capacity {
		t.Errorf("%d block requests not seen whole (with %d flushes), want at most the %d the devices' queues can hold in flight at attach", unseen, flushes, capacity)
	}
}

// queueCapacity is how many requests the machine's block devices can
// have in flight at once: the sum of their queues' nr_requests.
func queueCapacity(t *testing.T) uint64 {
	t.Helper()
	files, err := filepath.Glob("/sys/block/*/queue/nr_requests")
	if err != nil || len(files) == 0 {
		t.Fatalf("no block device queues in /sys/block: %v", err)
	}
	var n uint64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		n += v
	}
	return n
}

// A trace of a few seconds under load has a BPF cost: the kernel counts
// our programs' run time in a window soon after attaching, not only half
// a minute in, so a 6 s slowlog's JSON summary and a hist's text both
// show a non-zero figure.
func TestShortTraceHasBPFCost(t *testing.T) {
	c := startPG(t, nil)
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	pid := fmt.Sprint(c.PostmasterPID())
	slow := startTrace(t, "slowlog", "--json", "--min-query", "1s", "--pid", pid)
	hist := startTrace(t, "hist", "--pid", pid)
	if _, err := c.Pgbench(ctx, "postgres", "-n", "-S", "-c", "2", "-T", "6"); err != nil {
		t.Fatal(err)
	}
	_, _, sum := slow.stop(t)
	text := hist.stopText(t)
	if cost := sum.Cost; cost == nil || cost.BPFSampledSeconds <= 0 || cost.BPFRunsPerSec <= 0 || cost.BPFCPUPerSec <= 0 || len(cost.Programs) == 0 {
		t.Errorf("slowlog's summary after %.1fs has no BPF cost: %+v", sum.Seconds, sum.Cost)
	}
	line := regexp.MustCompile(`cost: BPF ([0-9.]+)% of one CPU, ([0-9]+) runs/s`).FindStringSubmatch(text)
	if line == nil {
		t.Fatalf("hist's summary has no BPF cost line:\n%s", text)
	}
	if runs, _ := strconv.ParseUint(line[2], 10, 64); runs == 0 {
		t.Errorf("hist's cost line counted no program runs: %s", line[0])
	}
}

// startHogs runs n CPU hogs on every core until the test ends: whatever
// wakes there waits for a CPU.
func startHogs(t *testing.T, n int) {
	t.Helper()
	for cpu := 0; cpu < runtime.NumCPU(); cpu++ {
		for i := 0; i < n; i++ {
			h := exec.Command("taskset", "-c", fmt.Sprint(cpu), "sh", "-c", "while :; do :; done")
			if err := h.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Process.Kill(); h.Wait() })
		}
	}
	time.Sleep(300 * time.Millisecond) // settled: a woken task's credit does not decide its wait
}

// The run-queue histogram holds waits whose length is known, and only
// them. One backend sleeps a thousand times in one query (pg_sleep) with
// CPU hogs on every core, so that each wake waits for a CPU. The kernel
// stamps a woken task's queueing, and counts its switch-ins with that
// stamp (/proc/PID/schedstat's third field, pcount); the run queue's
// clock measures the wait from the stamp, except after a wake that
// preempts the CPU's task, when the switch skips the clock's update: those
// waits are unknown (runq_unknown), once counted as waits of 0 ns. So the
// samples, the unknown ones and the switch-ins recovered from the
// kernel's stamp (waterfall_recovered) add up to the query's stamped
// switch-ins, and no sample is a zero-length wait.
func TestRunQueueHistogramHoldsKnownWaits(t *testing.T) {
	c := startPG(t, map[string]string{"max_parallel_workers_per_gather": "0"})
	s := openSession(t, c)
	backend, err := strconv.Atoi(s.run(t, "SELECT pg_backend_pid()"))
	if err != nil {
		t.Fatal(err)
	}
	tr := startTrace(t, "hist", "--json", "--pid", fmt.Sprint(c.PostmasterPID()))
	startHogs(t, 2)
	before := switchIns(t, backend)
	s.run(t, "SELECT count(pg_sleep(0.0002)) FROM generate_series(1, 1000)")
	after := switchIns(t, backend)
	_, _, sum := tr.stop(t)
	h := sum.Hists["runq"]
	if h == nil {
		t.Fatalf("no run-queue histogram in the summary (drops %v)", sum.Drops)
	}
	var short uint64
	for slot := 0; slot < 7; slot++ { // under 128 ns
		short += h.Buckets[slot]
	}
	stamped, unknown, recovered := after-before, sum.Drops["runq_unknown"], sum.Drops["waterfall_recovered"]
	t.Logf("run-queue samples %d (%d under 128 ns), unknown %d, recovered %d; switch-ins the kernel stamped %d",
		h.Count, short, unknown, recovered, stamped)
	if short > 0 {
		t.Errorf("%d of %d run-queue waits under 128 ns: a wake waits microseconds at least, or its wait is unknown", short, h.Count)
	}
	// The kernel's count has, beside the query's switch-ins, the backend's
	// wake for the query's message and, at worst, one after a preemption
	// between its reply and its next read: up to 2 more. (A preemption of
	// the backend on its way to sleep, a state set but not yet asleep, is
	// a sample without a stamp: none was seen on this query.)
	if n := h.Count + unknown + recovered; n > stamped || n+2 < stamped {
		t.Errorf("%d run-queue samples + %d unknown + %d recovered, want the %d switch-ins of the query the kernel stamped (up to 2 fewer)",
			h.Count, unknown, recovered, stamped)
	}
	if h.Count == 0 {
		t.Errorf("no run-queue wait measured among %d wakes behind CPU hogs", stamped)
	}
}

// switchIns is how many times a thread was switched in with a known wait
// for a CPU: /proc/PID/schedstat's third field (the kernel's pcount).
func switchIns(t *testing.T, tid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", tid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		t.Fatalf("/proc/%d/schedstat: %q, want 3 fields", tid, b)
	}
	n, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
