package main

import (
	"errors"
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
	TargetQPS     int         `json:"target_qps"` // 0: as fast as the backend answers
	Sent          int         `json:"queries_sent"`
	QPS           float64     `json:"qps"`
	EventsPerS    float64     `json:"bpf_events_per_sec"` // program runs: socket calls, context switches
	BPFnsPerQuery float64     `json:"bpf_ns_per_query"`   // the programs' run time, per query sent
	RecsPerS      float64     `json:"records_per_sec"`    // query records delivered to user space
	Delivered     uint64      `json:"delivered"`
	Counted       uint64      `json:"counted_in_kernel"` // -counted: queries the kernel counted by statement identity
	Drops         model.Drops `json:"drops"`
	Accounted     bool        `json:"accounted"` // delivered + counted + dropped = sent
	MaxRSSBytes   int64       `json:"max_rss_bytes"`
	HeapBytes     uint64      `json:"go_heap_bytes"`
}

// capacity raises the query rate step by step, every query a record (the
// heaviest mode: each one a ring-buffer record, read, normalized and
// written as JSON), and finds the highest rate held for the whole step
// with nothing lost. The load is the synthetic backend of
// internal/loadgen: a real server on this machine cannot go fast enough;
// the same load untraced first gives the machine's ceiling for it.
// Queries come pipelined in batches of capacityBatch, as a busy connection
// pool sends them, to -clients backends at once (one per CPU keeps every
// CPU busy: one backend leaves its client's CPU waiting); the drain runs
// every 100 ms, as in the commands.
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
	ceiling, err := untracedQPS(o.secs, o.clients)
	if err != nil {
		return fmt.Errorf("untraced: %w", err)
	}
	fmt.Fprintf(os.Stderr, "untraced: %.0f q/s (%d backends, batches of %d)\n", ceiling, o.clients, capacityBatch)
	var steps []step
	best := step{}
	for _, rate := range rates {
		s, err := capacityStep(rate, o.secs, o.clients, counted)
		if err != nil {
			return fmt.Errorf("at %d queries/s: %w", rate, err)
		}
		steps = append(steps, s)
		fmt.Fprintf(os.Stderr, "target %7d q/s: %7.0f q/s, %8.0f BPF events/s (%.0f ns a query), %7.0f records/s, %d counted in the kernel, lost %d (%s), accounted %v, RSS %d MB\n",
			rate, s.QPS, s.EventsPerS, s.BPFnsPerQuery, s.RecsPerS, s.Counted, s.Drops.Lost(), output.DropsText(s.Drops), s.Accounted, s.MaxRSSBytes>>20)
		if s.Drops.Lost() == 0 && s.Accounted && s.EventsPerS > best.EventsPerS {
			best = s
		}
	}
	fmt.Printf("\ncapacity: %.0f BPF events/s (%.0f query records/s) held for %ds with nothing lost; peak memory %d MB\n",
		best.EventsPerS, best.RecsPerS, o.secs, maxRSS(steps)>>20)
	// The machine's ceiling: what the load makes untraced, in the events
	// the traced run saw per query. A capacity near it is the machine's.
	if best.QPS > 0 {
		fmt.Printf("the load's ceiling on this machine: %.0f queries/s untraced, %.0f BPF events/s at %.2f a query\n",
			ceiling, ceiling*best.EventsPerS/best.QPS, best.EventsPerS/best.QPS)
	}
	return saveJSON(o.out, "capacity", map[string]any{"seconds": o.secs, "backends": o.clients, "batch": capacityBatch,
		"untraced_qps": ceiling, "steps": steps, "best": best})
}

// capacityBatch is how many queries the client sends at once: the backend
// reads them in one call and answers each with a send of its own.
const capacityBatch = 64

// startBackends starts n synthetic backends; stop closes them.
func startBackends(n int) (bs []*loadgen.Backend, stop func(), err error) {
	stop = func() {
		for _, b := range bs {
			b.Close()
		}
	}
	for range n {
		b, err := loadgen.Start()
		if err != nil {
			stop()
			return nil, nil, err
		}
		bs = append(bs, b)
	}
	return bs, stop, nil
}

// load sends each backend each queries at once, rate a second in all (0:
// as fast as they answer), calling poll meanwhile when given; it returns
// how long they took.
func load(bs []*loadgen.Backend, each, rate int, poll func() error) (time.Duration, error) {
	done := make(chan error, len(bs))
	start := time.Now()
	for _, b := range bs {
		go func() {
			_, err := b.Run(each, rate/len(bs), capacityBatch)
			done <- err
		}()
	}
	var errs []error
	for running := len(bs); running > 0; {
		select {
		case err := <-done:
			errs = append(errs, err)
			running--
		default:
			if poll == nil {
				errs = append(errs, <-done)
				running--
			} else if err := poll(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return time.Since(start), errors.Join(errs...)
}

// perBackend is how many queries each of n backends is sent in a step.
func perBackend(rate, secs, n int) int {
	if rate == 0 {
		return secs * 200000 // about what a backend answers here
	}
	return secs * rate / n
}

// untracedQPS is the rate the backends answer at with nothing attached:
// the machine's ceiling for the load, whatever the tracer costs.
func untracedQPS(secs, backends int) (float64, error) {
	bs, stop, err := startBackends(backends)
	if err != nil {
		return 0, err
	}
	defer stop()
	each := perBackend(0, secs, backends)
	elapsed, err := load(bs, each, 0, nil)
	return float64(each*backends) / elapsed.Seconds(), err
}

func capacityStep(rate, secs, backends int, counted bool) (step, error) {
	st := step{TargetQPS: rate}
	emit := probe.EmitAll
	if counted {
		emit = probe.Emit{MinQuery: -1, MinFS: -1, Statements: true}
	}
	s, err := session.OpenProcesses(probe.PGWire|probe.Sched|probe.Block, emit)
	if err != nil {
		return st, err
	}
	defer s.Close()
	bs, stop, err := startBackends(backends)
	if err != nil {
		return st, err
	}
	defer stop()
	for _, b := range bs {
		if err := s.Track(b.PID(), true); err != nil {
			return st, err
		}
	}
	runsBefore, timeBefore := s.ProgramRuns()
	each := perBackend(rate, secs, backends)
	st.Sent = each * backends
	js := output.NewJSON(io.Discard)
	onQuery := func(q *model.Query) {
		st.Delivered++
		js.Write(q)
	}
	elapsed, err := load(bs, each, rate, func() error { return s.Poll(time.Now().Add(100*time.Millisecond), onQuery, nil) })
	if err != nil {
		return st, err
	}
	runs, runtime := s.ProgramRuns()
	runs -= runsBefore
	st.BPFnsPerQuery = float64(runtime-timeBefore) / float64(st.Sent)
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
