package session

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/dbiolat/dbiolat/internal/elfvar"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/postgres"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/sqlnorm"
	"github.com/dbiolat/dbiolat/internal/usdt"
)

// PostgreSQL: a postmaster and the processes it forks, each with a role
// in its title; queries from its client protocol (probe.PGWire) or its USDT
// probes (--usdt); waits from the wait event each backend publishes.

var postgresEngine = engine{
	protocol: func(f probe.Families) (probe.Families, error) { return f & probe.PGWire, nil },
	discover: func() ([]server, error) {
		ins, err := postgres.Discover()
		out := make([]server, len(ins))
		for i, in := range ins {
			out[i] = newPgServer(in)
		}
		return out, err
	},
	byPID:     func(pid int) (server, error) { return pgServerOf(postgres.ByPID(pid)) },
	byDataDir: func(dir string) (server, error) { return pgServerOf(postgres.ByDataDir(dir)) },
	waitName: func(version int, event uint32) (string, bool) {
		w := postgres.WaitEvent(event)
		return w.Name(version), w.Class() != "unknown"
	},
}

// pgServer is a PostgreSQL server traced.
type pgServer struct {
	postgres.Instance
	// tranches names its extensions' LWLock tranches, read from it the
	// first time a wait on one is named (nil: none known).
	tranches func() postgres.Tranches
}

func newPgServer(in postgres.Instance) *pgServer {
	return &pgServer{Instance: in, tranches: sync.OnceValue(func() postgres.Tranches {
		t, _ := postgres.ReadTranches(in) // unread, a tranche is named by its id
		return t
	})}
}

func pgServerOf(in postgres.Instance, err error) (server, error) {
	if err != nil {
		return nil, err
	}
	return newPgServer(in), nil
}

func (p *pgServer) engine() *engine { return &postgresEngine }

func (p *pgServer) about() model.Server {
	return model.Server{Kind: "PostgreSQL", Version: strconv.Itoa(p.Version), PID: p.PID, DataDir: p.DataDir, Port: p.Port}
}

func (p *pgServer) unit(unit uint32) (pid, tid int) { return int(unit), 0 }

func (p *pgServer) tick(*Session, time.Time) {}

func (p *pgServer) waitName(event uint32) string {
	return postgres.WaitEvent(event).NameOn(p.Version, p.tranches)
}

// role reads a process's title. A postmaster's child shows the
// postmaster's title until it sets its own: it is read again next time.
func (p *pgServer) role(pid uint32) (proc, bool) {
	d, err := postgres.Describe(int(pid))
	if err != nil {
		return proc{}, false
	}
	return procOf(d, d.Role == postgres.Postmaster && int(pid) != p.PID), true
}

func procOf(d postgres.Process, again bool) proc {
	return proc{role: model.Role(d.Role), database: d.Database, user: d.User, clientAddr: d.ClientAddr, clientPort: d.ClientPort, again: again}
}

// attach tracks the postmaster, then its children (those it forks from
// now on inherit it in the kernel), and attaches the uprobes of its
// binary: asynchronous I/O handoff, USDT probes.
func (p *pgServer) attach(s *Session) error {
	info := p.procInfo(s)
	if err := s.tracer.Track(p.PID, info, false); err != nil {
		return err
	}
	if err := s.tracer.ServerPort(p.Port, p.PID); err != nil { // a pooler's TCP connections to it: pooler.go
		return err
	}
	pids, err := p.Processes()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		s.owners[uint32(pid)] = p.PID
		who := s.describe(uint32(pid))
		if err := s.tracer.Track(pid, info, who.role == model.Role(postgres.ClientBackend)); err != nil {
			return err
		}
	}
	// Reads I/O workers perform for a query (18 on): charged to it.
	err = s.tracer.AttachAIO(p.Binary, probe.AIOFunctions{Stage: postgres.AIOStage, Perform: postgres.AIOPerform,
		Complete: postgres.AIOComplete})
	if err != nil && !errors.Is(err, probe.ErrNoFunction) { // no such functions: no asynchronous I/O
		s.warn(fmt.Sprintf("PostgreSQL %d: reads its I/O workers perform cannot be charged to queries: %v", p.PID, err))
	}
	// Lock waits come from USDT probes in any mode; queries only with --usdt.
	_, err = s.tracer.AttachUSDT(p.Binary, probe.USDTProbes{
		Provider:   postgres.Provider,
		QueryStart: postgres.QueryStart, QueryDone: postgres.QueryDone,
		LockStart: postgres.LockWaitStart, LockDone: postgres.LockWaitDone,
		LWLockStart: postgres.LWLockWaitStart, LWLockDone: postgres.LWLockWaitDone,
		BufferReadDone: postgres.BufferReadDone,
	})
	if errors.Is(err, usdt.ErrNoProbes) || errors.Is(err, probe.ErrNoProbe) {
		exe, _ := os.Readlink(p.Binary)
		switch {
		case s.cfg.Families&probe.USDT != 0:
			return fmt.Errorf("PostgreSQL %d runs %s, which has no USDT query probes (it was built without --enable-dtrace): leave out --usdt to take queries from the client protocol", p.PID, exe)
		case s.cfg.Families&probe.Buffers != 0:
			return fmt.Errorf("PostgreSQL %d runs %s, which has no USDT buffer probes (it was built without --enable-dtrace): --buffers needs a build with them, such as Debian's or PGDG's packages", p.PID, exe)
		}
		if info.WaitEventPtr == 0 {
			s.warn(fmt.Sprintf("PostgreSQL %d runs %s, built without USDT probes: lock waits are counted as other waits", p.PID, exe))
		}
		return nil
	}
	// Without uprobe_multi links (before Linux 6.6), uprobes are perf events,
	// which need CAP_SYS_ADMIN.
	if errors.Is(err, os.ErrPermission) {
		if s.cfg.Families&probe.USDT != 0 || s.cfg.Families&probe.Buffers != 0 {
			return errors.New("attaching PostgreSQL's USDT probes (uprobes) needs CAP_SYS_ADMIN on this kernel: run dbiolat as root, or leave out --usdt and --buffers")
		}
		if info.WaitEventPtr == 0 {
			s.warn("attaching PostgreSQL's USDT lock probes (uprobes) needs CAP_SYS_ADMIN on this kernel: lock waits are counted as other waits")
		}
		return nil
	}
	return err
}

// procInfo is what the kernel side needs of the server's processes:
// where they publish their wait events, and which one means waiting for
// others' asynchronous I/O.
func (p *pgServer) procInfo(s *Session) probe.ProcInfo {
	info := probe.ProcInfo{Instance: p.PID, Version: p.Version}
	addr, err := elfvar.Address(p.PID, p.Binary, postgres.WaitEventVariable)
	if err != nil {
		s.warn(fmt.Sprintf("PostgreSQL %d: its wait events cannot be read (%v): sleeps are named by what the kernel sees", p.PID, err))
	}
	info.WaitEventPtr = addr
	// Unknown, queries have no application: not worth a warning of its own.
	info.ApplicationPtr, _ = elfvar.Address(p.PID, p.Binary, postgres.ApplicationVariable)
	// The statement's query id, where the version's layout is known.
	if off, err := p.queryIDOffset(); err != nil {
		s.warnOnce("queryid "+strconv.Itoa(p.Version), fmt.Sprintf("PostgreSQL %d: %v", p.PID, err))
	} else {
		info.StatusPtr, _ = elfvar.Address(p.PID, p.Binary, postgres.StatusVariable)
		info.QueryIDOffset, info.DatabaseOffset = off, postgres.DatabaseIDOffset
	}
	if code, ok := postgres.WaitEventCode(p.Version, "IO/AioIoCompletion"); ok {
		info.AIOWaitEvent = uint32(code)
	}
	if s.cfg.Families&probe.PGWire != 0 { // the client protocol's programs read the plaintext
		info.TLSProbed = s.attachOpenSSL(p.PID, fmt.Sprintf("PostgreSQL %d", p.PID), probe.PGWire)
	}
	return info
}

// query reads a record's statements out of the round trip's messages
// (or, from USDT, its text) and its backend's role, database and client.
func (p *pgServer) query(s *Session, t *traced, e *probe.QueryEvent, text []byte) *model.Query {
	if x, gone := s.exited[e.Tgid]; gone && e.StartNs > x.endNs { // its pid taken again: another process
		s.forget(e.Tgid)
	}
	truncated := e.TextTruncated != 0
	only := false // the record's statement is the only one of its round trip
	if e.TextKind == uint8(probe.TextPGWire) || e.TextKind == uint8(probe.TextPGWirePart) {
		part := e.TextKind == uint8(probe.TextPGWirePart)
		pl, query, cut := s.pipelines.read(s.statements, e.Tgid, capture{part: part,
			first: int(e.TextFirst), skip: int(e.TextSkip), at: e.TextAt, text: text})
		named, unnamed := pl.textOf(int(e.FirstStatement), int(e.Statements), query)
		msgs := text // the messages from the first whole one on (a part's first bytes end an earlier one)
		if part {
			msgs = text[min(int(e.TextSkip), len(text)):]
		}
		switch {
		case e.PortalsEnded > 0: // statements of earlier round trips, ended in this one
			named, unnamed, cut, truncated = s.suspended.ended(e.Tgid, int(e.PortalsEnded), postgres.ParsePortals(msgs)), 0, false, false
		case e.PortalsOpen > 0: // it left a fresh portal suspended: the statement after those it ended
			place := int(e.FirstStatement + e.Statements)
			opened, _ := pl.textOf(place, 1, query)
			p := openPortal{text: opened}
			if executed := postgres.ParsePortals(msgs).Executed; place-int(e.TextFirst) < len(executed) && place >= int(e.TextFirst) {
				p.portal = executed[place-int(e.TextFirst)]
			}
			s.suspended.opened(e.Tgid, p, int(e.PortalsOpen))
		}
		if !readWhole(e) {
			return nil
		}
		s.unnamed += uint64(unnamed)
		text, truncated = []byte(named), truncated || cut
		// The backend keeps one query id at a time, whichever statement of
		// the round trip set it last: a record's own only when the round
		// trip ran that statement alone (not statements ended with their
		// portals, which an earlier round trip ran).
		only = !part && !cut && e.PortalsEnded == 0 && e.FirstStatement == 0 && pl.first == 0 && len(pl.texts) == 1
	} else { // USDT's: a simple Query's text
		only = len(sqlnorm.Statements(string(text))) == 1
	}
	who := s.describe(e.Tgid)
	if who.role == model.Role(postgres.Postmaster) || who.role == model.RoleUnknown {
		// Gone before /proc could be read: the record carries the title.
		title := unsafe.Slice((*byte)(unsafe.Pointer(&e.Title[0])), len(e.Title))
		if n := bytes.IndexByte(title, 0); n >= 0 {
			title = title[:n]
		}
		d := postgres.ParseTitle(string(title))
		if d.Role != postgres.ClientBackend {
			d = postgres.Process{Role: postgres.ClientBackend} // only backends run queries
		}
		who = procOf(d, false)
		s.procs[e.Tgid] = who
	}
	q := s.accounted(t, e)
	q.PortalsEnded, q.EarlierNs = int(e.PortalsEnded), e.EarlierNs
	q.Role, q.Database, q.User, q.ClientAddr, q.ClientPort = string(who.role), who.database, who.user, who.clientAddr, who.clientPort
	q.Application = application(unsafe.Slice((*byte)(unsafe.Pointer(&e.Application[0])), len(e.Application)))
	s.pooled(q, &e.Pooled)
	s.statement(q, text, truncated, sqlnorm.PostgreSQL)
	if only && !truncated && e.Statements == 1 {
		q.QueryID = int64(e.Queryid) // as pg_stat_statements shows it: signed
	}
	return q
}

// check counts the USDT probes of its binary (without them lock waits
// are other waits, and --usdt and --buffers do not work), and says
// whether records will carry the server's query ids.
func (p *pgServer) check() []ServerCheck {
	checks := []ServerCheck{p.checkUSDT(), p.checkQueryID()}
	if p.Version >= 18 {
		checks = append(checks, p.checkAIO())
	}
	return checks
}

// checkAIO says whether the reads others perform for a query (18 on:
// asynchronous I/O) are charged to it, in the version's own settings.
func (p *pgServer) checkAIO() ServerCheck {
	c := ServerCheck{Name: fmt.Sprintf("asynchronous I/O of instance pid %d (PostgreSQL %d)", p.PID, p.Version)}
	workers := "io_workers of them"
	if p.Version >= 19 {
		workers = "between io_min_workers and io_max_workers of them"
	}
	if !exports(p.Binary, postgres.AIOStage, postgres.AIOPerform, postgres.AIOComplete) {
		c.Err = fmt.Errorf("its binary exports no %s: reads its I/O workers perform are theirs, not the query's", postgres.AIOStage)
		return c
	}
	c.Info = "reads its I/O workers perform (io_method=worker, the default; " + workers + ") and io_uring's kernel workers (io_method=io_uring) are charged to the query that staged them"
	return c
}

// checkQueryID says whether query ids are read: the version's layout is
// known and the binary exports where each backend's status entry is.
func (p *pgServer) checkQueryID() ServerCheck {
	c := ServerCheck{Name: fmt.Sprintf("query ids of instance pid %d (PostgreSQL %d)", p.PID, p.Version)}
	if _, c.Err = p.queryIDOffset(); c.Err == nil {
		c.Info = "records carry the statement's queryid, as pg_stat_statements and pg_stat_activity name it, when the server computes one (compute_query_id on, or auto with pg_stat_statements loaded)"
	}
	return c
}

// queryIDOffset is where the server's backends keep their statement's
// query id in their status entry, if that and the entry can be found.
func (p *pgServer) queryIDOffset() (uint32, error) {
	off, err := postgres.QueryIDOffset(p.Version)
	if err != nil {
		return 0, fmt.Errorf("records carry no queryid: %w", err)
	}
	if _, err := elfvar.Address(p.PID, p.Binary, postgres.StatusVariable); err != nil {
		return 0, fmt.Errorf("records carry no queryid: the server's status entry cannot be found (%v)", err)
	}
	return off, nil
}

func (p *pgServer) checkUSDT() ServerCheck {
	exe, _ := os.Readlink(p.Binary)
	c := ServerCheck{Name: fmt.Sprintf("USDT probes of instance pid %d (data %s, binary %s)", p.PID, p.DataDir, exe)}
	probes, err := usdt.Open(p.Binary)
	switch {
	case errors.Is(err, usdt.ErrNoProbes):
		c.Err = errors.New("no USDT probes (built without --enable-dtrace): queries are traced from the client protocol, but lock waits count as other waits, and --usdt and --buffers do not work")
	case err != nil:
		c.Err = err
	default:
		c.Info = fmt.Sprintf("%d probe sites; query__start %d, query__done %d", len(probes),
			len(usdt.Find(probes, postgres.Provider, postgres.QueryStart)), len(usdt.Find(probes, postgres.Provider, postgres.QueryDone)))
	}
	return c
}
