package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
)

// drainEvery is how often query records are read from the ring buffer;
// the kernel side never wakes us (GUIDE §4), so this is the only reader.
// With quietTicks, only while polls find something to hurry for.
const drainEvery = 100 * time.Millisecond

// tracer is the loop every tracing command shares: attach, drain records,
// call tick every interval, stop on Ctrl-C, --duration or after count ticks.
type tracer struct {
	opts      targetOptions
	families  probe.Families
	emit      probe.Emit
	interval  time.Duration                  // 0: no ticks
	count     int                            // ticks before stopping; 0 = no limit
	onStart   func(s *session.Session) error // once attached, before any record
	onQuery   func(*model.Query) error
	onProcess func(*model.Process) error // runs of traced processes that exited
	onTick    func(s *session.Session) error
	// drain, if set, takes requests to show everything finished so far:
	// the loop drains once more, flushes, and closes the channel it got.
	// A demo or bench asks before it moves on to its next step.
	drain chan chan struct{}
	// keepPrivileges: the command starts or stops processes as other
	// users after attaching (demo, bench); the others give up what they
	// no longer need once attached.
	keepPrivileges bool
	// reattach: the command detaches and attaches again (serve's duty
	// cycles), so it keeps what attaching takes.
	reattach bool
	// warn, if set, takes the session's warnings (an instance restarted...)
	// instead of stderr: top's screen shows them on its last line.
	warn func(msg string)
	// costWindow: how long each minute's count of our programs' run time
	// lasts (session.Config.CostWindow).
	costWindow time.Duration
	// ratesByServer: intervals split I/O by server and database too
	// (serve's series).
	ratesByServer bool
	// wait: with no server running and none named, wait for one (serve,
	// top: a DaemonSet starts before the databases it watches).
	wait bool
	// quietTicks: while polls are quiet (session.Quiet), drain at each
	// tick only (serve: a record then waits up to a second; an idle
	// serve's CPU is mostly its wakeups: about 6 ms a second with ten
	// drains a second, 2.7 with one).
	quietTicks bool
}

func (t *tracer) run(ctx context.Context) (*session.Session, error) {
	if t.opts.Buffers {
		t.families |= probe.Buffers
	}
	if t.opts.FS {
		t.families |= probe.FS
	}
	if t.opts.USDT && t.families&probe.PGWire != 0 {
		t.families = t.families&^probe.PGWire | probe.USDT
	}
	warn := t.warn
	if warn == nil {
		warn = func(msg string) { fmt.Fprintln(os.Stderr, "dbiolat: "+msg) }
	}
	s, err := session.Open(session.Config{
		PID: t.opts.PID, PGData: t.opts.PGData, RawSQL: t.opts.RawSQL, Families: t.families, Emit: t.emit, Warn: warn,
		CostWindow: t.costWindow, RatesByServer: t.ratesByServer, Wait: t.wait,
	})
	if err != nil {
		return nil, err
	}
	if t.onStart != nil {
		if err := t.onStart(s); err != nil {
			s.Close()
			return nil, err
		}
	}
	if !t.keepPrivileges {
		if err := session.DropPrivileges(t.reattach); err != nil {
			fmt.Fprintln(os.Stderr, "dbiolat: "+err.Error())
		}
	}
	// On stderr even with --json: scripts wait for this line to know the probes are attached.
	what := describeServers(s)
	switch {
	case what == "":
		fmt.Fprintln(os.Stderr, "No database server is running: waiting for one to start.")
		what = "any PostgreSQL, MySQL or MariaDB server that starts"
	case t.opts.PID == 0 && t.opts.PGData == "":
		what += " and any that starts"
	}
	fmt.Fprintf(os.Stderr, "Tracing %s... Hit Ctrl-C to end.\n", what)
	if t.opts.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.opts.Duration)
		defer cancel()
	}
	var qerr error
	poll := func(deadline time.Time) error {
		err := s.Poll(deadline, func(q *model.Query) {
			if t.onQuery != nil && qerr == nil {
				qerr = t.onQuery(q)
			}
		}, func(p *model.Process) {
			if t.onProcess != nil && qerr == nil {
				qerr = t.onProcess(p)
			}
		})
		return cmp.Or(err, qerr, stdout.Flush()) // flushed once per drain, not per line
	}
	nextTick, ticks := time.Now().Add(t.interval), 0
	for {
		deadline := time.Now().Add(drainEvery)
		if t.interval > 0 && (nextTick.Before(deadline) || s.Paused() || t.quietTicks && s.Quiet()) {
			deadline = nextTick // hooks off (duty cycles), or quiet polls: the tick's drain is soon enough
		}
		if err := poll(deadline); err != nil {
			return s, err
		}
		if ctx.Err() != nil {
			// Stop counting, then one last drain so records finished before the stop are shown.
			return s, cmp.Or(s.Detach(), poll(time.Now().Add(10*time.Millisecond)))
		}
		select {
		case done := <-t.drain: // a drain begun after the request sees what finished before it
			err := poll(time.Now().Add(10 * time.Millisecond))
			close(done)
			if err != nil {
				return s, err
			}
		default:
		}
		if t.interval > 0 && !time.Now().Before(nextTick) {
			if err := t.onTick(s); err != nil {
				return s, err
			}
			ticks++
			if t.count > 0 && ticks >= t.count {
				return s, s.Detach()
			}
			nextTick = nextTick.Add(t.interval)
		}
	}
}

// describeServers names what a trace follows: each server (a count of
// those of one kind, when several), and the storage engines under them.
func describeServers(s *session.Session) string {
	var what []string
	servers := s.Servers()
	for i, sv := range servers {
		n := 0
		for _, other := range servers {
			if other.Kind == sv.Kind {
				n++
			}
		}
		switch {
		case n == 1:
			what = append(what, fmt.Sprintf("%s pid %d (%s)", sv.Kind, sv.PID, sv.Name))
		case !slices.ContainsFunc(servers[:i], func(o model.Server) bool { return o.Kind == sv.Kind }):
			what = append(what, fmt.Sprintf("%d %s servers", n, sv.Kind))
		}
	}
	for _, e := range s.Engines {
		what = append(what, "its storage engine "+e.String())
	}
	return strings.Join(what, ", ")
}

// finish prints a session's closing summary, as JSON or text; with
// printHists the text form shows the histograms above it.
func finish(s *session.Session, o targetOptions, reported uint64, withHists, printHists bool) error {
	return finishWith(s, o, reported, withHists, printHists, nil)
}

// finishWith is finish with what became of the records offered to an
// OpenTelemetry export (nil: none).
func finishWith(s *session.Session, o targetOptions, reported uint64, withHists, printHists bool, exported []model.OTLPCount) error {
	sum, err := s.Summary(reported, withHists)
	if err != nil {
		return err
	}
	sum.OTLP = exported
	if o.JSON {
		return output.NewJSON(stdout).Write(sum)
	}
	if printHists {
		if err := output.Hists(stdout, sum.Hists); err != nil {
			return err
		}
		if err := output.WaitHists(stdout, sum.WaitHists); err != nil {
			return err
		}
	}
	output.Summary(stdout, sum)
	return nil
}
