package session

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/probe"
	"golang.org/x/sys/unix"
)

// What a trace adds up to: histograms, drops, counts and its own cost.

// Queries is the number of queries finished since the session attached,
// recorded or not.
func (s *Session) Queries() (uint64, error) {
	hs, err := s.tracer.Hists()
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range hs["query"].Slots {
		n += c
	}
	return n, nil
}

// Elapsed is the time since the session attached.
func (s *Session) Elapsed() time.Duration { return time.Since(s.start) }

// Hists returns the histograms collected in the kernel so far.
func (s *Session) Hists() (model.Hists, error) {
	kh, err := s.tracer.Hists()
	if err != nil {
		return nil, err
	}
	out := model.Hists{}
	for name, k := range kh {
		out[name] = toHist(k)
	}
	return out, nil
}

// toHist turns a kernel histogram into the model's.
func toHist(k probe.Hist) *hist.Hist {
	h := &hist.Hist{Sum: k.Sum}
	for slot, n := range k.Slots {
		if n > 0 {
			h.AddSlot(slot, n)
		}
	}
	return h
}

// WaitHists returns the sleeps of queries by wait event, as histograms
// named as Query.Waits names them.
func (s *Session) WaitHists() (model.Hists, error) {
	kh, err := s.tracer.WaitHists()
	if err != nil {
		return nil, err
	}
	out := model.Hists{}
	for k, v := range kh {
		h := toHist(v)
		name := s.waitHistName(int(k.Version), k.Event)
		if prev := out[name]; prev != nil {
			prev.Merge(h)
		} else {
			out[name] = h
		}
	}
	return out, nil
}

// Drops returns the counters of what could not be delivered or
// attributed: the kernel's, the runs the kernel skipped, and the
// statements no capture named.
func (s *Session) Drops() (model.Drops, error) {
	st, err := s.tracer.Stats()
	if err != nil {
		return nil, err
	}
	_, _, st["programs_skipped"] = s.tracer.ProgramRuns()
	st["wire_unnamed"] = s.unnamed
	return model.Drops(st), nil
}

// Summary builds the closing record of the session.
func (s *Session) Summary(reported uint64, withHists bool) (*model.Summary, error) {
	drops, queries, err := s.counters()
	if err != nil {
		return nil, err
	}
	sum := &model.Summary{Type: "summary", Seconds: s.Elapsed().Seconds(), Queries: queries, Reported: reported, Drops: drops,
		Traced: s.Layers()}
	for _, t := range s.current {
		sum.Instances = append(sum.Instances, t.about().PID)
	}
	if withHists {
		if sum.Hists, err = s.Hists(); err != nil {
			return nil, err
		}
		if sum.WaitHists, err = s.WaitHists(); err != nil {
			return nil, err
		}
	}
	sum.Cost = s.Cost()
	return sum, nil
}

// Layers names the probe families attached now (wire, fs, block...).
func (s *Session) Layers() []string { return s.tracer.Attached().Names() }

// ProgramRuns is how many times the kernel has run the session's
// programs while its BPF statistics were on, and for how long.
func (s *Session) ProgramRuns() (uint64, time.Duration) {
	runs, runtime, _ := s.tracer.ProgramRuns()
	return runs, runtime
}

// Cost measures what the session has cost so far.
func (s *Session) Cost() *model.Cost {
	s.tracer.SampleStats(false) // count the window open now
	c := &model.Cost{BPFMapBytes: s.tracer.MapBytes()}
	if progs, secs, err := s.tracer.ProgramStats(); err == nil && secs > 0 {
		c.BPFSampledSeconds = secs
		var runs, ns uint64
		for _, p := range progs {
			c.Programs = append(c.Programs, model.ProgramCost{Name: p.Name, Runs: p.Runs, RunNs: p.RunNs})
			runs += p.Runs
			ns += p.RunNs
		}
		c.BPFRunsPerSec, c.BPFCPUPerSec = float64(runs)/secs, float64(ns)/1e9/secs
	}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		c.CPUNs = uint64(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c.MaxRSSBytes = peakRSS()
	return c
}

// peakRSS is the process's peak resident memory (VmHWM). Not getrusage's
// maxrss: that one keeps the peak of whatever started us, which Go's
// os/exec shares its memory with until the exec.
func peakRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb uint64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			return kb << 10
		}
	}
	return 0
}

// The kernel counts our programs' run time in windows (a second, or
// Config.CostWindow): one soon after attaching, so that a short trace (a
// demo, a test, a quick look) has a cost line too, then one in every
// minute, half a minute in. Counting slows every program run (two clock
// reads, about what most of our programs take on a VM), so it is off
// otherwise: two windows in a trace's first minute, one in each after.
// The first waits out the attach's own first seconds.
const (
	sampleFirst  = 2 * time.Second
	sampleEvery  = time.Minute
	sampleAt     = 30 * time.Second
	sampleLength = time.Second
)

// sampleCost opens and closes the counting windows; Poll calls it. A
// window opens at the first poll past its start and closes at the first
// past its length (polls may be a second apart: serve's quiet ones), so
// none is missed; its length is measured, not assumed.
func (s *Session) sampleCost() {
	length := cmp.Or(s.cfg.CostWindow, sampleLength)
	elapsed := s.Elapsed()
	if s.costOpened > 0 {
		if elapsed-s.costOpened >= length {
			s.tracer.SampleStats(false)
			s.costOpened = 0
		}
		return
	}
	if elapsed < max(s.costDue, sampleFirst) {
		return
	}
	s.tracer.SampleStats(true)
	s.costOpened = elapsed
	s.costDue = elapsed - elapsed%sampleEvery + sampleAt // the next: half a minute into a minute, after this one
	for s.costDue < elapsed+length {
		s.costDue += sampleEvery
	}
}

// counters reads the drop counters and the number of queries so far.
func (s *Session) counters() (model.Drops, uint64, error) {
	drops, err := s.Drops()
	if err != nil {
		return drops, 0, err
	}
	queries, err := s.Queries()
	return drops, queries, err
}

// StateSizes counts what the session holds per process or per request,
// in the kernel's maps and in its own caches: all of it must shrink back
// when connections and requests end.
func (s *Session) StateSizes() (map[string]int, error) {
	sizes, err := s.tracer.MapEntries()
	if err != nil {
		return nil, err
	}
	sizes["roles"], sizes["statements"] = len(s.procs), len(s.statements)
	return sizes, nil
}
