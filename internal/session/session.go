// Package session runs one trace: it finds the database servers, loads
// and attaches the probes, and turns what the kernel collected into model
// records. Commands read only what it returns.
package session

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dbiolat/dbiolat/internal/container"
	"github.com/dbiolat/dbiolat/internal/elfvar"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/procfs"
	"github.com/dbiolat/dbiolat/internal/storage"
)

// Config says what to trace and how.
type Config struct {
	PID      int    // any process of the instance; 0 = not given
	PGData   string // data directory; "" = not given
	RawSQL   bool   // keep literals in query text
	Families probe.Families
	Emit     probe.Emit   // which queries become records
	Warn     func(string) // non-fatal problems; nil = discard
	// CostWindow is how long each window in which the kernel counts our
	// programs' run time lasts (the cost line, dbiolat_bpf_cpu_ratio;
	// sampleCost): 0, a second. Duty cycles count a whole period, paused
	// time included.
	CostWindow time.Duration
	// Wait: with no server running and none named, trace nothing until
	// one starts (serve, top), rather than fail.
	Wait bool
	// RatesByServer splits the intervals' I/O rows by server and database
	// too (model.Rate's Server and Database), and gives them their
	// latency histograms (Interval.RoleHists): for series, not for a table.
	RatesByServer bool
	// processesOnly: OpenProcesses' session, which traces the processes
	// its caller tracks and never a server it finds.
	processesOnly bool
}

// discovers says no server was named: every server of the host is
// traced, and any that starts.
func (cfg Config) discovers() bool { return cfg.PID == 0 && cfg.PGData == "" && !cfg.processesOnly }

// Session is one attached trace.
type Session struct {
	cfg     Config
	tracer  *probe.Tracer
	Engines []storage.Engine // userspace storage engines serving the servers (FUSE daemons)
	procs   map[uint32]proc  // what each traced process (or MySQL thread) is
	wallOff time.Duration    // wall clock minus CLOCK_MONOTONIC
	start   time.Time

	// servers: every server attached since the start, by its main
	// process; current: those traced now or waiting to come back, in
	// the order found (a restarted server takes its old place).
	servers  map[int]*traced
	current  []*traced
	untraced *traced         // what reads the records of processes traced on their own (Track)
	refused  map[int]bool    // servers found but not traceable with the families chosen (warned once)
	warned   map[string]bool // warnOnce's keys: what was said already

	exited       map[uint32]exit // pid -> its exit, as seen
	prevTotals   totals          // for Interval
	prevQueries  uint64
	records      uint64 // query records read from the kernel
	prevRecords  uint64
	statements   statements             // named prepared statements per backend, learned from the wire
	pipelines    pipelines              // the statement texts of each backend's current round trip
	unnamed      uint64                 // statements of records shown that no capture named (wire_unnamed)
	suspended    suspended              // the statements each backend's suspended portals run, not yet counted
	counted      counted                // the kernel's statement counts: their names, what was read (counted.go)
	unitsRead    map[uint32]unitCounts  // the backends' figures as Backends last read them (backends.go)
	exitedIO     rateRows               // what processes that exited did since the last interval
	exitedHists  roleHists              // and their histograms' gains (RatesByServer)
	leftForLater map[uint32]bool        // units whose counts the last interval left for this one
	unfolded     []uint32               // exited processes whose kernel totals are not folded yet
	folded       time.Time              // when foldExited last ran
	followed     time.Time              // when follow last looked for restarted servers
	quiet        bool                   // the last Poll found nothing to hurry for (Quiet)
	costOpened   time.Duration          // when the open counting window opened (sampleCost); 0: none is
	costDue      time.Duration          // when the next opens
	owners       map[uint32]int         // the server each tracked process (or MySQL thread) belongs to
	poolers      map[int]followedPooler // the connection poolers followed (pooler.go), by pid
	boxes        []boxOf                // where each kernel box goes in a model.Query
}

// boxOf is one waterfall box: its index in the kernel's query_acct, and
// the model's field for it.
type boxOf struct {
	kernel int
	of     func(*model.Query) *uint64
}

// Open finds the servers and attaches to them. With no server running
// and none named, it fails, unless cfg.Wait: then it traces nothing until
// one starts.
func Open(cfg Config) (*Session, error) {
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	discovering := cfg.discovers()
	found, err := servers(cfg.PID, cfg.PGData)
	if err != nil && !(errors.Is(err, errNoServer) && cfg.Wait) {
		return nil, err
	}
	// Each engine's protocol family is loaded if it has a server, or may
	// have one later, and attached once it has: until then it costs
	// nothing. So are storage engines' (Fuse).
	dormant := probe.Fuse
	for _, e := range engines {
		f, err := e.protocol(cfg.Families)
		has := slices.ContainsFunc(found, func(sv server) bool { return sv.engine() == e })
		if err != nil && has {
			return nil, err
		}
		if err == nil && (has || discovering) {
			dormant |= f
		}
	}
	s, err := open(cfg, cfg.Families&^probe.Protocols, dormant)
	if err != nil {
		return nil, err
	}
	for _, sv := range found {
		t, err := s.attach(sv)
		if err != nil && discovering && !runs(sv) {
			// Found, then gone before it was attached (a pod restarting
			// as the node's serve starts): follow finds it when it is back.
			s.warn(fmt.Sprintf("%s pid %d exited as it was attached: tracing it when it is back", sv.about().Kind, sv.about().PID))
			continue
		}
		if err != nil {
			s.Close()
			return nil, err
		}
		s.current = append(s.current, t)
	}
	s.followPoolers()
	return s, nil
}

// runs says a server's main process still runs.
func runs(sv server) bool {
	st, ok := procfs.StartOf(sv.about().PID)
	return ok && !st.Zombie
}

// attach traces a server from now on: its engine's protocol, its
// processes and threads, and the storage engines under its data
// directory, traced as a layer of their own.
func (s *Session) attach(sv server) (*traced, error) {
	pid := sv.about().PID
	t := &traced{server: sv}
	t.started, _ = procfs.StartOf(pid)
	if c, err := container.Of(pid); err == nil && c.InContainer() {
		t.container = &c
	}
	f, err := sv.engine().protocol(s.cfg.Families)
	if err == nil {
		err = s.tracer.Wake(f)
	}
	if err != nil {
		return nil, err
	}
	s.servers[pid] = t // before its processes are: their records name it
	err = sv.attach(s)
	if es, serr := storage.Under(sv.about().DataDir); err == nil && serr == nil {
		for _, e := range es {
			err = cmp.Or(err, s.trackEngine(pid, e))
		}
	}
	if err != nil {
		delete(s.servers, pid)
		return nil, err
	}
	return t, nil
}

// trackEngine traces a storage engine serving a server.
func (s *Session) trackEngine(server int, e storage.Engine) error {
	if err := s.tracer.Wake(probe.Fuse); err != nil {
		return err
	}
	if !slices.ContainsFunc(s.Engines, func(known storage.Engine) bool { return known.PID == e.PID }) {
		s.Engines = append(s.Engines, e)
	}
	s.procs[uint32(e.PID)] = proc{role: model.RoleStorageEngine}
	return s.tracer.Track(e.PID, probe.ProcInfo{Instance: server, Kind: probe.StorageEngine}, false)
}

// OpenProcesses attaches the probes with no database: the caller names
// the processes to trace with Track. A bench traces fio this way, to
// check dbiolat's block latency against fio's, and the capacity benchmark
// a synthetic backend (internal/loadgen).
func OpenProcesses(f probe.Families, emit probe.Emit) (*Session, error) {
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	return open(Config{Families: f, Emit: emit, processesOnly: true}, f, 0)
}

// open loads the programs of the families, attached or dormant (woken
// when what they trace is found).
func open(cfg Config, attached, dormant probe.Families) (*Session, error) {
	if err := CheckBTF(); err != nil {
		return nil, err
	}
	if cfg.Families&probe.FS != 0 {
		if _, err := EnsureTracefs(); err != nil {
			return nil, err
		}
	}
	t, err := probe.Load(attached, dormant, cfg.Emit)
	if err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, tracer: t, procs: map[uint32]proc{}, statements: statements{}, pipelines: pipelines{}, suspended: suspended{},
		exited: map[uint32]exit{}, servers: map[int]*traced{}, untraced: &traced{server: &pgServer{}}, refused: map[int]bool{},
		warned: map[string]bool{},
		owners: map[uint32]int{}, poolers: map[int]followedPooler{}, start: time.Now(), wallOff: wallOffset()}
	for _, b := range model.Boxes {
		if i := slices.Index(t.BoxNames(), strings.TrimSuffix(b.Name, "_ns")); b.Kernel && i >= 0 {
			s.boxes = append(s.boxes, boxOf{i, b.Of})
		}
	}
	return s, nil
}

// Track traces process pid, its threads and its children from now on, on
// their own (not as part of a database instance); client says it serves a
// client connection in PostgreSQL's protocol.
func (s *Session) Track(pid int, client bool) error {
	return s.tracer.Track(pid, probe.ProcInfo{Instance: pid}, client)
}

// attachOpenSSL reads a server's TLS connections in plaintext at the
// OpenSSL it maps, with its protocol family's programs; false if it maps
// none or the probes cannot be attached (its TLS connections are then
// counted, not traced).
func (s *Session) attachOpenSSL(pid int, server string, protocol probe.Families) bool {
	lib, err := elfvar.Library(pid, probe.OpenSSL.Library)
	if err != nil || lib == "" {
		return false
	}
	if err := s.tracer.AttachTLS(protocol, lib, probe.OpenSSL); err != nil {
		s.warn(fmt.Sprintf("%s: its TLS connections cannot be read (%v): they are counted, not traced", server, err))
		return false
	}
	return true
}

func (s *Session) warn(msg string) {
	if s.cfg.Warn != nil {
		s.cfg.Warn(msg)
	}
}

// warnOnce warns the first time only for a key: a limit of a version,
// say, is not repeated for every server of it or every restart.
func (s *Session) warnOnce(key, msg string) {
	if !s.warned[key] {
		s.warned[key] = true
		s.warn(msg)
	}
}

// forgetAfter is how long the role of an exited process is kept: longer
// than any reporting interval reads it.
const forgetAfter = time.Minute

// exit is a process's exit: when Go read it, and its time on the kernel's
// clock (a record of a query begun later is another process's).
type exit struct {
	seen  time.Time
	endNs uint64
}

// Server names the first server traced and its data directory: what a
// recording says it traced.
func (s *Session) Server() (name, dataDir string) {
	if len(s.current) == 0 {
		return "", ""
	}
	m := s.current[0].about()
	return m.Kind + " " + m.Version, m.DataDir
}

// Servers describes the servers traced now.
func (s *Session) Servers() []model.Server {
	var out []model.Server
	for _, t := range s.current {
		if !t.gone {
			out = append(out, t.describe())
		}
	}
	return out
}

// server describes the server whose main process is pid; the zero Server
// for one not traced.
func (s *Session) server(pid int) model.Server {
	if t := s.servers[pid]; t != nil {
		return t.describe()
	}
	return model.Server{}
}

// Close detaches everything.
func (s *Session) Close() error { return s.tracer.Close() }

// Detach stops counting: what is read afterwards (the last records, the
// histograms, the totals) is one consistent state, in which every
// file-system read is counted once as a read and once as a hit or a miss.
func (s *Session) Detach() error { return s.tracer.Detach() }

// Pause detaches the hooks but process tracking's until Resume: nothing
// is measured meanwhile, and nothing costs (duty cycles).
func (s *Session) Pause() error { return s.tracer.Pause() }

// Paused says whether the hooks are off (between Pause and Resume).
func (s *Session) Paused() bool { return s.tracer.Paused() }

// Resume attaches again what Pause detached; what began meanwhile is
// left out (probe.Tracer.Resume).
func (s *Session) Resume() error { return s.tracer.Resume() }
