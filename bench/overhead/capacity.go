package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/dbiolat/dbiolat/internal/loadgen"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
)

// step is one load level of the capacity ladder.
type step struct {
	TargetQPS   int         `json:"target_qps"` // 0: as fast as the backend answers
	Sent        int         `json:"queries_sent"`
	QPS         float64     `json:"qps"`
	EventsPerS  float64     `json:"bpf_events_per_sec"` // program runs: socket calls, context switches
	RecsPerS    float64     `json:"records_per_sec"`    // query records delivered to user space
	Delivered   uint64      `json:"delivered"`
	Counted     uint64      `json:"counted_in_kernel"` // -counted: queries the kernel counted by statement identity
	Drops       model.Drops `json:"drops"`
	Accounted   bool        `json:"accounted"` // delivered + counted + dropped = sent
	MaxRSSBytes int64       `json:"max_rss_bytes"`
	HeapBytes   uint64      `json:"go_heap_bytes"`
}

// capacity raises the query rate step by step, every query a record (the
// heaviest mode: each one a ring-buffer record, read, normalized and
// written as JSON), and finds the highest rate held for the whole step
// with nothing lost. The load is the synthetic backend of
// internal/loadgen: a real server on this machine cannot go fast enough.
// Queries come pipelined in batches of 16, as a busy connection pool sends
// them; the drain runs every 100 ms, as in the commands.
//
// With counted (-counted), the ladder runs serve's mode instead: every
// query counted in the kernel by its statement's identity, a record only
// of the first of each identity on a CPU.
func capacity(o options, rates []int, counted bool) error {
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME) // to count the events, not to time them
	if err != nil {
		return fmt.Errorf("enabling BPF statistics: %w", err)
	}
	defer stats.Close()
	var steps []step
	best := step{}
	for _, rate := range rates {
		s, err := capacityStep(rate, o.secs, counted)
		if err != nil {
			return fmt.Errorf("at %d queries/s: %w", rate, err)
		}
		steps = append(steps, s)
		fmt.Fprintf(os.Stderr, "target %7d q/s: %7.0f q/s, %8.0f BPF events/s, %7.0f records/s, %d counted in the kernel, lost %d (%s), accounted %v, RSS %d MB\n",
			rate, s.QPS, s.EventsPerS, s.RecsPerS, s.Counted, s.Drops.Lost(), output.DropsText(s.Drops), s.Accounted, s.MaxRSSBytes>>20)
		if s.Drops.Lost() == 0 && s.Accounted && s.EventsPerS > best.EventsPerS {
			best = s
		}
	}
	fmt.Printf("\ncapacity: %.0f BPF events/s (%.0f query records/s) held for %ds with nothing lost; peak memory %d MB\n",
		best.EventsPerS, best.RecsPerS, o.secs, maxRSS(steps)>>20)
	return saveJSON(o.out, "capacity", map[string]any{"seconds": o.secs, "steps": steps, "best": best})
}

func capacityStep(rate, secs int, counted bool) (step, error) {
	st := step{TargetQPS: rate}
	b, err := loadgen.Start()
	if err != nil {
		return st, err
	}
	defer b.Close()
	emit := probe.EmitAll
	if counted {
		emit = probe.Emit{MinQuery: -1, MinFS: -1, Statements: true}
	}
	s, err := session.OpenProcesses(probe.PGWire|probe.Sched|probe.Block, emit)
	if err != nil {
		return st, err
	}
	defer s.Close()
	if err := s.Track(b.PID(), true); err != nil {
		return st, err
	}
	before := s.ProgramRuns()
	st.Sent = secs * rate
	if rate == 0 {
		st.Sent = secs * 200000 // about what the backend answers here
	}
	done := make(chan error, 1)
	var elapsed time.Duration
	go func() {
		var err error
		elapsed, err = b.Run(st.Sent, rate, 16)
		done <- err
	}()
	js := output.NewJSON(io.Discard)
	onQuery := func(q *model.Query) {
		st.Delivered++
		js.Write(q)
	}
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				return st, err
			}
			running = false
		default:
			if err := s.Poll(time.Now().Add(100*time.Millisecond), onQuery, nil); err != nil {
				return st, err
			}
		}
	}
	runs := s.ProgramRuns() - before
	if err := s.Poll(time.Now(), onQuery, nil); err != nil {
		return st, err
	}
	if st.Drops, err = s.Drops(); err != nil {
		return st, err
	}
	if counted {
		cs, err := s.Statements()
		if err != nil {
			return st, err
		}
		for _, c := range cs {
			st.Counted += uint64(c.Sums.Statements)
		}
	}
	sec := elapsed.Seconds()
	st.QPS, st.EventsPerS, st.RecsPerS = float64(st.Sent)/sec, float64(runs)/sec, float64(st.Delivered)/sec
	st.Accounted = st.Delivered+st.Counted+st.Drops.Lost() == uint64(st.Sent)
	c := s.Cost()
	st.MaxRSSBytes, st.HeapBytes = int64(c.MaxRSSBytes), heapBytes()
	return st, nil
}

func maxRSS(steps []step) int64 {
	var m int64
	for _, s := range steps {
		m = max(m, s.MaxRSSBytes)
	}
	return m
}

func parseRates(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 0 {
			return nil, fmt.Errorf("bad rate %q in -capacity (queries per second, 0: unlimited)", f)
		}
		out = append(out, n)
	}
	return out, nil
}
