// Package session runs one trace: it finds the PostgreSQL instances, loads
// and attaches the probes, and turns what the kernel collected into model
// records. Commands read only what it returns.
package session

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbiolat/dbiolat/internal/container"
	"github.com/dbiolat/dbiolat/internal/elfvar"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/mysql"
	"github.com/dbiolat/dbiolat/internal/postgres"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/storage"
	"github.com/dbiolat/dbiolat/internal/usdt"
)

// Config says what to trace and how.
type Config struct {
	PID      int    // any process of the instance; 0 = not given
	PGData   string // data directory; "" = not given
	RawSQL   bool   // keep literals in query text
	Families probe.Families
	Emit     probe.Emit   // which queries become records
	Warn     func(string) // non-fatal problems; nil = discard
	// CostWindow is how long, each minute, the kernel counts our
	// programs' run time (the cost line, dbiolat_bpf_cpu_ratio); 0: a
	// second. Duty cycles count a whole period, paused time included.
	CostWindow time.Duration
	// RatesByServer splits the intervals' I/O rows by server and database
	// too (model.Rate's Server and Database), and gives them their
	// latency histograms (Interval.RoleHists): for series, not for a table.
	RatesByServer bool
}

// Session is one attached trace.
type Session struct {
	cfg       Config
	tracer    *probe.Tracer
	Instances []postgres.Instance
	MySQL     []mysql.Instance // MySQL and MariaDB servers
	Engines   []storage.Engine // userspace storage engines serving them (FUSE daemons)
	procs     map[uint32]postgres.Process
	wallOff   time.Duration // wall clock minus CLOCK_MONOTONIC
	start     time.Time

	exited       map[uint32]time.Time // pid -> when its exit was seen
	prevTotals   totals               // for Interval
	prevQueries  uint64
	statements   statements                // named prepared statements per backend, learned from the wire
	pipelines    pipelines                 // the statement texts of each backend's current round trip
	exitedIO     rateRows                  // what processes that exited did since the last interval
	exitedHists  roleHists                 // and their histograms' gains (RatesByServer)
	leftForLater map[uint32]bool           // units whose counts the last interval left for this one
	unfolded     []uint32                  // exited processes whose kernel totals are not folded yet
	folded       time.Time                 // when foldExited last ran
	followed     time.Time                 // when follow last looked for restarted instances
	gone         map[int]bool              // postmasters seen exited, not back yet
	instances    map[int]postgres.Instance // by postmaster pid, every one attached since the start
	mysqls       map[int]mysql.Instance    // MySQL servers by pid
	myThreads    map[int]*mysql.Threads    // what tells their threads' roles, by server pid
	containers   map[int]*container.Info   // the container each server runs in, by its pid; nil: the host
	owners       map[uint32]int            // the server each tracked process (or MySQL thread) belongs to
	myConns      map[uint64]*myConn        // MySQL connections by the kernel's key for them
	boxes        []boxOf                   // where each kernel box goes in a model.Query
}

// boxOf is one waterfall box: its index in the kernel's query_acct, and
// the model's field for it.
type boxOf struct {
	kernel int
	of     func(*model.Query) *uint64
}

// Open finds the instances and attaches to them.
func Open(cfg Config) (*Session, error) {
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	instances, mysqls, err := Servers(cfg.PID, cfg.PGData)
	if err != nil {
		return nil, err
	}
	if len(mysqls) > 0 {
		if cfg.Families&(probe.USDT|probe.Buffers) != 0 {
			return nil, errors.New("MySQL and MariaDB have no USDT probes: leave out --usdt and --buffers for them (point at a PostgreSQL with --pid or --pgdata)")
		}
		cfg.Families |= probe.MySQLWire
	}
	// Userspace storage engines under the data directories: their
	// requests are timed, and they are traced as a layer of their own.
	engines := map[int][]storage.Engine{}
	for _, in := range instances {
		if es, err := storage.Under(in.DataDir); err == nil && len(es) > 0 {
			engines[in.PID] = es
			cfg.Families |= probe.Fuse
		}
	}
	s, err := open(cfg)
	if err != nil {
		return nil, err
	}
	s.Instances, s.MySQL = instances, mysqls
	for _, in := range mysqls {
		if err := s.attachMySQL(in); err != nil {
			s.Close()
			return nil, err
		}
	}
	for _, in := range instances {
		err := s.attach(in)
		for _, e := range engines[in.PID] {
			if err == nil {
				err = s.trackEngine(in, e)
			}
		}
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// EngineRole is the role of a storage engine's process in records and rates.
const EngineRole postgres.Role = "storage engine"

// trackEngine traces a storage engine serving an instance.
func (s *Session) trackEngine(in postgres.Instance, e storage.Engine) error {
	s.procs[uint32(e.PID)] = postgres.Process{Role: EngineRole}
	s.Engines = append(s.Engines, e)
	return s.tracer.Track(e.PID, probe.ProcInfo{Instance: in.PID, Kind: probe.StorageEngine}, false)
}

// OpenProcesses attaches the probes with no database: the caller names
// the processes to trace with Track. A bench traces fio this way, to
// check dbiolat's block latency against fio's, and the capacity benchmark
// a synthetic backend (internal/loadgen).
func OpenProcesses(f probe.Families, emit probe.Emit) (*Session, error) {
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	return open(Config{Families: f, Emit: emit})
}

func open(cfg Config) (*Session, error) {
	if err := CheckBTF(); err != nil {
		return nil, err
	}
	if cfg.Families&probe.FS != 0 {
		if _, err := EnsureTracefs(); err != nil {
			return nil, err
		}
	}
	t, err := probe.Open(cfg.Families, cfg.Emit)
	if err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, tracer: t, procs: map[uint32]postgres.Process{}, statements: statements{}, pipelines: pipelines{},
		exited: map[uint32]time.Time{}, gone: map[int]bool{}, instances: map[int]postgres.Instance{},
		mysqls: map[int]mysql.Instance{}, owners: map[uint32]int{}, myThreads: map[int]*mysql.Threads{}, myConns: map[uint64]*myConn{},
		containers: map[int]*container.Info{},
		start:      time.Now(), wallOff: wallOffset()}
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

// Servers finds the database servers a trace attaches to: the one a
// process belongs to (pid), the one serving a data directory (dir), or,
// with neither, every PostgreSQL, MySQL and MariaDB running on the host.
func Servers(pid int, dir string) ([]postgres.Instance, []mysql.Instance, error) {
	if pid == 0 && dir == "" {
		pgs, err := postgres.Discover()
		if err != nil {
			return nil, nil, err
		}
		mys, err := mysql.Discover()
		if err != nil {
			return nil, nil, err
		}
		if len(pgs)+len(mys) == 0 {
			return nil, nil, errors.New("no running PostgreSQL, MySQL or MariaDB found: start one, or point at it with --pid or --pgdata")
		}
		return pgs, mys, nil
	}
	pgs, pgErr := Instances(pid, dir)
	if pgErr == nil {
		return pgs, nil, nil
	}
	if mys, err := mysqlInstances(pid, dir); err == nil {
		return nil, mys, nil
	}
	// A process we can see that is neither: say so for both kinds; else
	// PostgreSQL's error says what is wrong (no such process, no permission).
	if _, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); pid != 0 && err == nil {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		return nil, nil, fmt.Errorf("process %d (%s) is neither PostgreSQL nor MySQL or MariaDB: give the PID of a postgres, mysqld or mariadbd process, or use --pgdata",
			pid, strings.TrimSpace(string(comm)))
	}
	return nil, nil, pgErr
}

// Instances finds the instances a trace attaches to: the one a process
// belongs to (pid), the one serving a data directory (pgdata), or, with
// neither, every PostgreSQL running on the host.
func Instances(pid int, pgdata string) ([]postgres.Instance, error) {
	switch {
	case pid != 0:
		in, err := postgres.ByPID(pid)
		return []postgres.Instance{in}, err
	case pgdata != "":
		in, err := postgres.ByDataDir(pgdata)
		return []postgres.Instance{in}, err
	}
	ins, err := postgres.Discover()
	if err != nil {
		return nil, err
	}
	if len(ins) == 0 {
		return nil, errors.New("no running PostgreSQL found: start one, or point at it with --pid or --pgdata")
	}
	return ins, nil
}

func (s *Session) attach(in postgres.Instance) error {
	s.learnContainer(in.PID)
	info := s.procInfo(in)
	// Track first: children forked from here on inherit it in the kernel.
	if err := s.tracer.Track(in.PID, info, false); err != nil {
		return err
	}
	pids, err := in.Processes()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		p := s.describe(uint32(pid))
		if err := s.tracer.Track(pid, info, p.Role == postgres.ClientBackend); err != nil {
			return err
		}
	}
	// Reads I/O workers perform for a query (18 on): charged to it.
	err = s.tracer.AttachAIO(in.Binary, probe.AIOFunctions{Stage: postgres.AIOStage, Perform: postgres.AIOPerform,
		Complete: postgres.AIOComplete})
	if err != nil && !errors.Is(err, probe.ErrNoFunction) { // no such functions: no asynchronous I/O
		s.warn(fmt.Sprintf("PostgreSQL %d: reads its I/O workers perform cannot be charged to queries: %v", in.PID, err))
	}
	// Lock waits come from USDT probes in any mode; queries only with --usdt.
	_, err = s.tracer.AttachUSDT(in.Binary, probe.USDTProbes{
		Provider:   postgres.Provider,
		QueryStart: postgres.QueryStart, QueryDone: postgres.QueryDone,
		LockStart: postgres.LockWaitStart, LockDone: postgres.LockWaitDone,
		LWLockStart: postgres.LWLockWaitStart, LWLockDone: postgres.LWLockWaitDone,
		BufferReadDone: postgres.BufferReadDone,
	})
	if errors.Is(err, usdt.ErrNoProbes) || errors.Is(err, probe.ErrNoProbe) {
		exe, _ := os.Readlink(in.Binary)
		switch {
		case s.cfg.Families&probe.USDT != 0:
			return fmt.Errorf("PostgreSQL %d runs %s, which has no USDT query probes (it was built without --enable-dtrace): leave out --usdt to take queries from the client protocol", in.PID, exe)
		case s.cfg.Families&probe.Buffers != 0:
			return fmt.Errorf("PostgreSQL %d runs %s, which has no USDT buffer probes (it was built without --enable-dtrace): --buffers needs a build with them, such as Debian's or PGDG's packages", in.PID, exe)
		}
		if info.WaitEventPtr == 0 {
			s.warn(fmt.Sprintf("PostgreSQL %d runs %s, built without USDT probes: lock waits are counted as other waits", in.PID, exe))
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

// procInfo is what the kernel side needs of an instance's processes:
// where they publish their wait events, and which one means waiting for
// others' asynchronous I/O.
func (s *Session) procInfo(in postgres.Instance) probe.ProcInfo {
	info := probe.ProcInfo{Instance: in.PID, Version: in.Version}
	s.instances[in.PID] = in
	addr, err := elfvar.Address(in.PID, in.Binary, postgres.WaitEventVariable)
	if err != nil {
		s.warn(fmt.Sprintf("PostgreSQL %d: its wait events cannot be read (%v): sleeps are named by what the kernel sees", in.PID, err))
	}
	info.WaitEventPtr = addr
	if code, ok := postgres.WaitEventCode(in.Version, "IO/AioIoCompletion"); ok {
		info.AIOWaitEvent = uint32(code)
	}
	if s.cfg.Families&probe.PGWire != 0 { // the client protocol's programs read the plaintext
		info.TLSProbed = s.attachOpenSSL(in.PID, fmt.Sprintf("PostgreSQL %d", in.PID), s.tracer.AttachTLS)
	}
	return info
}

// attachOpenSSL reads a server's TLS connections in plaintext at the
// OpenSSL it maps, with attach (its protocol's programs); false if it maps
// none or the probes cannot be attached (its TLS connections are then
// counted, not traced).
func (s *Session) attachOpenSSL(pid int, server string, attach func(library string, f probe.TLSFunctions) error) bool {
	lib, err := elfvar.Library(pid, probe.OpenSSL.Library)
	if err != nil || lib == "" {
		return false
	}
	if err := attach(lib, probe.OpenSSL); err != nil {
		s.warn(fmt.Sprintf("%s: its TLS connections cannot be read (%v): they are counted, not traced", server, err))
		return false
	}
	return true
}

// learnContainer notes the container a server runs in (its records name it).
func (s *Session) learnContainer(pid int) {
	if c, err := container.Of(pid); err == nil && c.InContainer() {
		s.containers[pid] = &c
	}
}

func (s *Session) warn(msg string) {
	if s.cfg.Warn != nil {
		s.cfg.Warn(msg)
	}
}

// forgetAfter is how long the role of an exited process is kept: longer
// than any reporting interval reads it.
const forgetAfter = time.Minute

// The kernel counts our programs' run time for one second in every
// minute, half a minute in: enough for the cost line, at a small fraction
// of what counting all the time would cost. Not at the start: counting
// slows every program run, and a short trace is often one measurement.
const (
	sampleEvery  = time.Minute
	sampleAt     = 30 * time.Second
	sampleLength = time.Second
)

// Server names the first server traced, PostgreSQL's first, and its
// data directory: what a recording says it traced.
func (s *Session) Server() (name, dataDir string) {
	switch {
	case len(s.Instances) > 0:
		return fmt.Sprintf("PostgreSQL %d", s.Instances[0].Version), s.Instances[0].DataDir
	case len(s.MySQL) > 0:
		return s.MySQL[0].Flavor + " " + s.MySQL[0].Version, s.MySQL[0].DataDir
	}
	return "", ""
}

// Servers describes the servers traced now.
func (s *Session) Servers() []model.Server {
	var out []model.Server
	for _, in := range s.Instances {
		if !s.gone[in.PID] {
			out = append(out, s.server(in.PID))
		}
	}
	for _, in := range s.MySQL {
		out = append(out, s.server(in.PID))
	}
	return out
}

// server describes the server whose process (postmaster, MySQL server)
// is pid; the zero Server for one not traced.
func (s *Session) server(pid int) model.Server {
	c := s.containers[pid]
	if my, ok := s.mysqls[pid]; ok {
		return model.Server{Name: model.ServerName(my.DataDir, c), Kind: my.Flavor, Version: my.Version, PID: pid, DataDir: my.DataDir, Port: my.Port, Container: c}
	}
	in, ok := s.instances[pid]
	if !ok {
		return model.Server{}
	}
	return model.Server{Name: model.ServerName(in.DataDir, c), Kind: "PostgreSQL", Version: strconv.Itoa(in.Version), PID: pid, DataDir: in.DataDir, Port: in.Port, Container: c}
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
