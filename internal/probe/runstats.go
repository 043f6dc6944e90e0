package probe

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// ProgramStat is what the kernel counted of one of our programs.
type ProgramStat struct {
	Name  string
	Runs  uint64
	RunNs uint64
}

// statsSample is the kernel's BPF statistics, turned on in windows: they
// cost two clock reads per program run, which on a VM is more than most
// of our programs, so they are sampled, not left on.
type statsSample struct {
	on      io.Closer
	started time.Time
	base    map[*ebpf.Program]ebpf.ProgramStats
	total   map[string]*ProgramStat
	seconds float64 // sampled so far
	err     error   // why the kernel refused, if it did
}

// SampleStats opens (on) or closes a window in which the kernel counts
// our programs' runs and run time; closing adds the window's counts.
func (t *Tracer) SampleStats(on bool) error {
	sm := &t.sample
	if on == (sm.on != nil) || sm.err != nil {
		return sm.err
	}
	if on {
		if sm.on, sm.err = ebpf.EnableStats(unix.BPF_STATS_RUN_TIME); sm.err != nil {
			return sm.err
		}
		sm.started, sm.base = time.Now(), map[*ebpf.Program]ebpf.ProgramStats{}
		for p := range t.progs {
			if st, err := p.Stats(); err == nil {
				sm.base[p] = *st
			}
		}
		return nil
	}
	if sm.total == nil {
		sm.total = map[string]*ProgramStat{}
	}
	for p, base := range sm.base {
		info, err := p.Info()
		st, serr := p.Stats()
		if err != nil || serr != nil {
			continue
		}
		ps := sm.total[info.Name]
		if ps == nil {
			ps = &ProgramStat{Name: info.Name}
			sm.total[info.Name] = ps
		}
		ps.Runs += st.RunCount - base.RunCount
		ps.RunNs += uint64(st.Runtime - base.Runtime)
	}
	sm.seconds += time.Since(sm.started).Seconds()
	err := sm.on.Close()
	sm.on = nil
	return err
}

// ProgramStats returns what the sampled windows counted of every attached
// program, by name, most run time first, and how long they were.
func (t *Tracer) ProgramStats() ([]ProgramStat, float64, error) {
	sm := &t.sample
	if sm.err != nil {
		return nil, 0, fmt.Errorf("the kernel does not count BPF run time: %w", sm.err)
	}
	out := make([]ProgramStat, 0, len(sm.total))
	for _, ps := range sm.total {
		out = append(out, *ps)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RunNs > out[j].RunNs })
	return out, sm.seconds, nil
}

// ProgramRuns is how many times the kernel has run our programs and for
// how long, counted only while its BPF statistics are on (SampleStats, or
// a benchmark's), and how many runs it skipped, counted always: a program
// is skipped when it is already running on that CPU (interrupted, then
// hit again).
func (t *Tracer) ProgramRuns() (runs uint64, runtime time.Duration, skipped uint64) {
	for p := range t.progs {
		if st, err := p.Stats(); err == nil {
			runs += st.RunCount
			runtime += st.Runtime
			skipped += st.RecursionMisses
		}
	}
	return runs, runtime, skipped
}
