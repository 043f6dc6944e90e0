package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gdamore/tcell/v2"
	"golang.org/x/term"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
	"github.com/dbiolat/dbiolat/internal/top"
)

// plainWidth is the width of top's plain output: a file or a pipe has none.
const plainWidth = 120

func runTopCmd(ctx context.Context, args []string) error {
	var o targetOptions
	fs := newFlagSet("top")
	o.AddFlags(fs)
	fsAlways(fs)
	interval := fs.Duration("interval", time.Second, "refresh every this long")
	count := fs.Int("count", 0, "stop after this many intervals; default: until q, Ctrl-C or --duration")
	sortBy := fs.String("sort", "total", "sort the tables by this column: "+strings.Join(top.ColumnNames(), ", "))
	choices(fs, "sort", top.ColumnNames()...)
	var filter top.Filter
	fs.StringVar(&filter.Database, "database", "", "show only the queries run on this database")
	fs.StringVar(&filter.User, "user", "", "show only the queries run by this user")
	fs.StringVar(&filter.Application, "application", "", "show only the queries sent by this application (PostgreSQL's application_name, MySQL's program_name)")
	fs.StringVar(&filter.Role, "role", "", "show only the queries and I/O of processes in this role (\"client backend\")")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return fmt.Errorf("unexpected argument %q: top takes only options (--interval, --count)", pos[0])
	case *interval < 100*time.Millisecond:
		return fmt.Errorf("--interval %v: give at least 100ms (records are drained every 100ms)", *interval)
	case *count < 0:
		return fmt.Errorf("--count %d: give a positive number of intervals, or 0 for no limit", *count)
	}
	v, err := top.NewView(*sortBy, filter)
	if err != nil {
		return err
	}
	// A screen only on a terminal: piped or redirected, or as JSON, the
	// intervals are printed one after the other.
	if o.JSON || !term.IsTerminal(int(os.Stdout.Fd())) {
		return runTopPlain(ctx, o, *interval, *count, v)
	}
	return runTopScreen(ctx, o, *interval, *count, v)
}

// topTracer is the trace top's two outputs share: every family on, every
// query counted (observe takes the records), each interval's snapshot to
// show. The aggregator is used under mu: the screen's keys read it too.
//
// The kernel counts PostgreSQL's queries by statement identity, as for
// serve (probe.Emit.Statements), and sends records only of queries of
// top.Slow or more, of a sample (top.Sample: a fingerprint's slow-log
// lines) and of those no identity counts (MySQL's, those without a query
// id, pipelines': the aggregator counts them). At each interval the
// fingerprints' rows take the statements' counts, and the backends' rows
// what the kernel keeps per process (queries begun, I/O): the statements'
// counts have no backend, and a record per query only for the backends'
// time would cost what counting in the kernel saves.
func topTracer(o targetOptions, interval time.Duration, count int, mu sync.Locker, agg *top.Aggregator, observe func(*model.Query), show func(*top.Snapshot) error) tracer {
	servers := func(s *session.Session) string {
		return cmp.Or(describeServers(s), "no database server yet: waiting for one to start")
	}
	emit := probe.Emit{MinQuery: top.Slow, MinFS: -1, Statements: true, Sample: top.Sample}
	return tracer{opts: o, families: probe.All, emit: emit, interval: interval, count: count, wait: true,
		onStart: func(s *session.Session) error {
			mu.Lock()
			defer mu.Unlock()
			agg.Start(servers(s), time.Now())
			return nil
		},
		onQuery: func(q *model.Query) error { observe(q); return nil },
		onTick: func(s *session.Session) error {
			cs, err := s.Statements()
			if err != nil {
				return err
			}
			bs, err := s.Backends()
			if err != nil {
				return err
			}
			iv, err := s.Interval()
			if err != nil {
				return err
			}
			desc := servers(s) // one may have started or restarted
			mu.Lock()
			agg.Servers(desc)
			agg.AddStatements(cs)
			agg.AddBackends(bs)
			snap := agg.Tick(iv)
			mu.Unlock()
			return show(snap)
		}}
}

// runTopPlain prints each interval: the screen's tables at a fixed width,
// or the frame as one JSON object.
func runTopPlain(ctx context.Context, o targetOptions, interval time.Duration, count int, v *top.View) error {
	agg := top.New()
	js := output.NewJSON(stdout)
	t := topTracer(o, interval, count, &sync.Mutex{}, agg, agg.Observe, func(snap *top.Snapshot) error { // one goroutine: the lock is never contended
		f := v.Frame(snap)
		if o.JSON {
			return js.Write(f)
		}
		stdout.WriteString("\n")
		for _, l := range top.Render(f, v, nil, plainWidth, 0) {
			stdout.WriteString(l.Text)
			stdout.WriteString("\n")
		}
		return nil
	})
	s, err := t.run(ctx)
	if s == nil {
		return err
	}
	defer s.Close()
	if ferr := finish(s, o, 0, false, false); ferr != nil {
		return ferr
	}
	return err
}

// topScreen is the full-screen view. The trace loop and the key reader
// share it under mu: the loop feeds the aggregator and redraws at each
// interval (unless frozen), a key changes the view and redraws at once.
type topScreen struct {
	mu       sync.Mutex
	screen   tcell.Screen // nil until the first interval, and once closed
	agg      *top.Aggregator
	view     *top.View
	shown    *top.Snapshot // what the screen shows: the last interval, or the one frozen
	warnings []string      // the session's, while the screen is up: printed again when it closes
	quit     context.CancelFunc
}

// runTopScreen traces until q, Ctrl-C, --duration or --count. The screen
// opens at the first interval, so that until then the terminal shows the
// trace's start (or why it failed), and closes on every way out, errors
// and panics included, restoring the terminal.
func runTopScreen(ctx context.Context, o targetOptions, interval time.Duration, count int, v *top.View) error {
	ctx, quit := context.WithCancel(ctx)
	defer quit()
	ts := &topScreen{agg: top.New(), view: v, quit: quit}
	defer ts.close()
	t := topTracer(o, interval, count, &ts.mu, ts.agg, ts.observe, ts.tick)
	t.warn = ts.warn
	s, err := t.run(ctx)
	ts.close()
	for _, w := range ts.warnings {
		fmt.Fprintln(os.Stderr, "dbiolat: "+w)
	}
	if s == nil {
		return err
	}
	defer s.Close()
	if ferr := finish(s, o, 0, false, false); ferr != nil {
		return ferr
	}
	return err
}

func (ts *topScreen) observe(q *model.Query) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.agg.Observe(q)
}

// tick shows an interval, opening the screen at the first.
func (ts *topScreen) tick(snap *top.Snapshot) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.view.Frozen || ts.shown == nil {
		ts.shown = snap
	}
	if ts.screen == nil {
		sc, err := tcell.NewScreen()
		if err == nil {
			err = sc.Init()
		}
		if err != nil {
			return fmt.Errorf("cannot draw on this terminal (%v): redirect the output or use --json for plain intervals", err)
		}
		ts.screen = sc
		go ts.readKeys(sc)
	}
	ts.draw()
	return nil
}

// readKeys applies keys to the view until the screen closes. A panic
// here would end the program without the trace loop's deferred close:
// the terminal is restored first.
func (ts *topScreen) readKeys(sc tcell.Screen) {
	defer func() {
		if r := recover(); r != nil {
			ts.close()
			panic(r)
		}
	}()
	for ev := sc.PollEvent(); ev != nil; ev = sc.PollEvent() { // nil: closed
		ts.event(sc, ev)
	}
}

func (ts *topScreen) event(sc tcell.Screen, ev tcell.Event) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.screen == nil {
		return
	}
	switch ev := ev.(type) {
	case *tcell.EventResize:
		sc.Sync()
		ts.draw()
	case *tcell.EventKey:
		if k, ok := topKey(ev); ok {
			if ts.view.Key(k) == top.Quit {
				ts.quit() // the trace loop stops within a drain, then closes the screen
				return
			}
			ts.draw()
		}
	}
}

// topSpecial are the keys top knows that are not characters (raw mode:
// Ctrl-C is a key, not a signal).
var topSpecial = map[tcell.Key]top.Special{
	tcell.KeyUp: top.Up, tcell.KeyDown: top.Down, tcell.KeyLeft: top.Left, tcell.KeyRight: top.Right,
	tcell.KeyPgUp: top.PageUp, tcell.KeyPgDn: top.PageDown, tcell.KeyEnter: top.Enter, tcell.KeyEscape: top.Esc,
	tcell.KeyBackspace: top.Backspace, tcell.KeyBackspace2: top.Backspace, tcell.KeyCtrlC: top.CtrlC,
}

// topKey translates tcell's keys.
func topKey(ev *tcell.EventKey) (top.Key, bool) {
	if ev.Key() == tcell.KeyRune {
		return top.Key{Rune: ev.Rune()}, true
	}
	s, ok := topSpecial[ev.Key()]
	return top.Key{Special: s}, ok
}

var topStyles = map[top.Style]tcell.Style{
	top.Title:    tcell.StyleDefault.Bold(true),
	top.Header:   tcell.StyleDefault.Reverse(true),
	top.Selected: tcell.StyleDefault.Reverse(true).Bold(true),
	top.Alert:    tcell.StyleDefault.Foreground(tcell.ColorRed).Bold(true),
	top.Prompt:   tcell.StyleDefault.Bold(true),
	top.Dim:      tcell.StyleDefault.Dim(true),
}

// draw shows the view of the snapshot shown; mu is held.
func (ts *topScreen) draw() {
	if ts.screen == nil {
		return
	}
	w, h := ts.screen.Size()
	f := ts.view.Frame(ts.shown)
	lines := top.Render(f, ts.view, ts.agg.Recent(ts.view.Selected()), w, h)
	ts.screen.Clear()
	ts.screen.HideCursor()
	for y, l := range lines {
		ts.screen.PutStrStyled(0, y, l.Text, topStyles[l.Style])
		if l.Style == top.Prompt {
			ts.screen.ShowCursor(len([]rune(l.Text)), y)
		}
	}
	ts.screen.Show()
}

// warn shows a warning of the session on the last line while the screen
// is up, and keeps it for stderr.
func (ts *topScreen) warn(msg string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.screen == nil {
		fmt.Fprintln(os.Stderr, "dbiolat: "+msg)
		return
	}
	if len(ts.warnings) < 20 {
		ts.warnings = append(ts.warnings, msg)
	}
	ts.view.Status = msg
	ts.draw()
}

// close restores the terminal; it may be called more than once. In a
// panic it runs as the stack unwinds, before the panic is printed.
func (ts *topScreen) close() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.screen != nil {
		ts.screen.Fini()
		ts.screen = nil
	}
}
