// Package session runs one trace: it finds the PostgreSQL instances, loads
// and attaches the probes, and turns what the kernel collected into model
// records. Commands read only what it returns.
package session

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dbiolat/dbiolat/internal/elfvar"
	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/postgres"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/sqlnorm"
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
}

// Session is one attached trace.
type Session struct {
	cfg       Config
	tracer    *probe.Tracer
	Instances []postgres.Instance
	procs     map[uint32]postgres.Process
	wallOff   time.Duration // wall clock minus CLOCK_MONOTONIC
	start     time.Time

	exited      map[uint32]time.Time // pid -> when its exit was seen
	prevTotals  totals               // for Interval
	prevQueries uint64
	statements  statements                // named prepared statements per backend, learned from the wire
	exitedIO    rateRows                  // what processes that exited did since the last interval
	unfolded    []uint32                  // exited processes whose kernel totals are not folded yet
	folded      time.Time                 // when foldExited last ran
	followed    time.Time                 // when follow last looked for restarted instances
	gone        map[int]bool              // postmasters seen exited, not back yet
	instances   map[int]postgres.Instance // by postmaster pid, every one attached since the start
	boxes       []boxOf                   // where each kernel box goes in a model.Query
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
	instances, err := Instances(cfg.PID, cfg.PGData)
	if err != nil {
		return nil, err
	}
	s, err := open(cfg)
	if err != nil {
		return nil, err
	}
	s.Instances = instances
	for _, in := range instances {
		if err := s.attach(in); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
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
	s := &Session{cfg: cfg, tracer: t, procs: map[uint32]postgres.Process{}, statements: statements{},
		exited: map[uint32]time.Time{}, gone: map[int]bool{}, instances: map[int]postgres.Instance{}, start: time.Now(), wallOff: wallOffset()}
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
	info.TLSProbed = s.attachTLS(in)
	return info
}

// attachTLS reads the instance's TLS connections in plaintext at the
// OpenSSL it maps, with the client protocol (Wire); false if it maps none
// or the probes cannot be attached (its TLS connections are then counted).
func (s *Session) attachTLS(in postgres.Instance) bool {
	if s.cfg.Families&probe.Wire == 0 {
		return false
	}
	lib, err := elfvar.Library(in.PID, postgres.TLSLibrary)
	if err != nil || lib == "" {
		return false
	}
	if err := s.tracer.AttachTLS(lib, probe.TLSFunctions{Read: postgres.TLSRead, Write: postgres.TLSWrite}); err != nil {
		s.warn(fmt.Sprintf("PostgreSQL %d: its TLS connections cannot be read (%v): they are counted, not traced", in.PID, err))
		return false
	}
	return true
}

// waits names a query's time asleep by wait event.
func (s *Session) waits(e *probe.QueryEvent) map[string]uint64 {
	var out map[string]uint64
	for _, w := range e.Waits {
		if w.Event == 0 {
			continue
		}
		name := model.OtherWaitEvents
		if w.Event != probe.WaitEventsOther {
			name = postgres.WaitEvent(w.Event).Name(s.instances[int(e.Instance)].Version)
		}
		if out == nil {
			out = map[string]uint64{}
		}
		out[name] += w.Ns
	}
	return out
}

func (s *Session) warn(msg string) {
	if s.cfg.Warn != nil {
		s.cfg.Warn(msg)
	}
}

// describe caches what a process is; a process that is gone keeps the
// role its queries imply.
func (s *Session) describe(pid uint32) postgres.Process {
	if p, ok := s.procs[pid]; ok && p.Role != postgres.Postmaster {
		return p
	}
	p, err := postgres.Describe(int(pid))
	if err != nil {
		p = postgres.Process{Role: postgres.Unknown}
	}
	s.procs[pid] = p
	return p
}

func wallOffset() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(time.Now().UnixNano() - ts.Nano())
}

// Poll delivers the query records that arrived, until the deadline, and
// the runs of processes that exited.
func (s *Session) Poll(deadline time.Time, onQuery func(*model.Query), onProcess func(*model.Process)) error {
	s.sampleCost()
	s.follow()
	// Learn new processes' roles while they live: a short autovacuum
	// worker is gone by the time its record is read.
	pids, err := s.tracer.Procs()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		s.describe(pid)
	}
	if err := s.tracer.ReadQueries(deadline, func(e *probe.QueryEvent, text []byte) {
		if q := s.query(e, text); q != nil {
			onQuery(q)
		}
	}); err != nil {
		return err
	}
	now := time.Now()
	err = s.tracer.ReadProcRuns(func(r *probe.ProcRun) {
		s.exited[r.Pid] = now
		s.unfolded = append(s.unfolded, r.Pid)
		if onProcess != nil {
			onProcess(s.process(r))
		}
	})
	if time.Since(s.folded) >= time.Second {
		s.folded = time.Now()
		err = cmp.Or(err, s.foldExited())
	}
	// Forget exited processes a while after their exit (a late record
	// still finds its role), so that connection churn does not grow the cache.
	for pid, at := range s.exited {
		if now.Sub(at) > forgetAfter {
			delete(s.procs, pid)
			delete(s.exited, pid)
			delete(s.statements, pid)
		}
	}
	return err
}

// forgetAfter is how long the role of an exited process is kept: longer
// than any reporting interval reads it.
const forgetAfter = time.Minute

func (s *Session) process(r *probe.ProcRun) *model.Process {
	p := s.describe(r.Pid)
	user, sys := r.CpuNs, uint64(0)
	if t := r.UtimeNs + r.StimeNs; t > 0 { // the kernel's split, applied to the exact total
		user = uint64(float64(r.CpuNs) * float64(r.UtimeNs) / float64(t))
		sys = r.CpuNs - user
	}
	in := s.instances[int(r.Instance)]
	return &model.Process{
		Type: "process", TS: time.Unix(0, int64(r.StartNs)+int64(s.wallOff)),
		PID: int(r.Pid), Instance: int(r.Instance), DataDir: in.DataDir, Port: in.Port,
		Role: string(p.Role), Database: p.Database, User: p.User,
		ElapsedNs: r.EndNs - r.StartNs, CPUNs: r.CpuNs, CPUUserNs: user, CPUSysNs: sys, RunqNs: r.RunqNs,
		FSTotals: fsTotals(&r.Fs),
	}
}

// fsTotals turns the kernel's per-operation counters into the model's.
func fsTotals(fs *[3]probe.IOAcct) model.FSTotals {
	r, w, y := fs[probe.FSRead], fs[probe.FSWrite], fs[probe.FSSync]
	return model.FSTotals{
		FSReadCount: r.Count, FSReadBytes: r.Bytes, FSReadNs: r.Ns,
		FSWriteCount: w.Count, FSWriteBytes: w.Bytes, FSWriteNs: w.Ns,
		FSSyncCount: y.Count, FSSyncNs: y.Ns,
	}
}

// query turns a record into a model.Query; nil for a record sent only to
// teach a prepared statement's text.
func (s *Session) query(e *probe.QueryEvent, text []byte) *model.Query {
	truncated := e.TextTruncated != 0
	if e.TextKind == uint8(probe.TextPGWire) {
		rt := s.statements.roundTrip(e.Tgid, text)
		if e.EmitFlags&uint8(probe.EmitWanted) == 0 {
			return nil
		}
		text, truncated = []byte(rt.Query), truncated || rt.Cut
	}
	p := s.describe(e.Tgid)
	if p.Role == postgres.Postmaster || p.Role == postgres.Unknown {
		// Gone before /proc could be read: the record carries the title.
		title := unsafe.Slice((*byte)(unsafe.Pointer(&e.Title[0])), len(e.Title))
		if n := bytes.IndexByte(title, 0); n >= 0 {
			title = title[:n]
		}
		if p = postgres.ParseTitle(string(title)); p.Role != postgres.ClientBackend {
			p = postgres.Process{Role: postgres.ClientBackend} // only backends run queries
		}
		s.procs[e.Tgid] = p
	}
	raw := strings.ToValidUTF8(string(text), "\uFFFD")
	norm, fp := sqlnorm.Of(raw)
	if s.cfg.RawSQL {
		norm = raw
	}
	a := &e.Acct
	in := s.instances[int(e.Instance)]
	q := &model.Query{
		Type:          "query",
		TS:            time.Unix(0, int64(e.StartNs)+int64(s.wallOff)),
		PID:           int(e.Tgid),
		Instance:      int(e.Instance),
		DataDir:       in.DataDir,
		Port:          in.Port,
		Role:          string(p.Role),
		Database:      p.Database,
		User:          p.User,
		ClientAddr:    p.ClientAddr,
		ClientPort:    p.ClientPort,
		Fingerprint:   fmt.Sprintf("%016x", fp),
		Query:         norm,
		Truncated:     truncated,
		QueryNs:       e.EndNs - e.StartNs,
		FSTotals:      fsTotals(&a.Fs),
		BlkCount:      a.Blk[0].Count + a.Blk[1].Count + a.Blk[2].Count,
		BlkBytes:      a.Blk[0].Bytes + a.Blk[1].Bytes + a.Blk[2].Bytes,
		BlkNs:         a.BlkBusyNs,
		BlkReadCount:  a.Blk[probe.BlkRead].Count,
		BlkWriteCount: a.Blk[probe.BlkWrite].Count,
		BlkQueueNs:    a.BlkQueueNs,
		BlkDeviceNs:   a.BlkDeviceNs,

		FSReadHitCount:  a.FsReadHit.Count,
		FSReadHitNs:     a.FsReadHit.Ns,
		FSReadMissCount: a.FsReadMiss.Count,
		FSReadMissNs:    a.FsReadMiss.Ns,
		ReadaheadPages:  a.ReadaheadPages,
		PrefetchCount:   a.Prefetch.Count,
		PrefetchBytes:   a.Prefetch.Bytes,
		AIOReadCount:    a.AioRead.Count,
		AIOReadBytes:    a.AioRead.Bytes,
		AIOReadNs:       a.AioRead.Ns,
		SharedHit:       a.SharedHit,
		SharedRead:      a.SharedRead,
	}
	for _, b := range s.boxes {
		*b.of(q) = a.BoxNs[b.kernel]
	}
	q.Waits = s.waits(e)
	q.UnaccountedNs = q.Unaccounted()
	return q
}

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
		name := postgres.WaitEvent(k.Event).Name(int(k.Version))
		if prev := out[name]; prev != nil {
			prev.Merge(h)
		} else {
			out[name] = h
		}
	}
	return out, nil
}

// Drops returns the counters of what could not be delivered or
// attributed: the kernel's, and the runs the kernel skipped.
func (s *Session) Drops() (model.Drops, error) {
	st, err := s.tracer.Stats()
	if err != nil {
		return nil, err
	}
	_, st["programs_skipped"] = s.tracer.ProgramRuns()
	return model.Drops(st), nil
}

// Summary builds the closing record of the session.
func (s *Session) Summary(reported uint64, withHists bool) (*model.Summary, error) {
	drops, queries, err := s.counters()
	if err != nil {
		return nil, err
	}
	sum := &model.Summary{Type: "summary", Seconds: s.Elapsed().Seconds(), Queries: queries, Reported: reported, Drops: drops,
		Traced: s.cfg.Families.Names()}
	for _, in := range s.Instances {
		sum.Instances = append(sum.Instances, in.PID)
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

// ProgramRuns is how many times the kernel has run the session's
// programs while its BPF statistics were on.
func (s *Session) ProgramRuns() uint64 {
	runs, _ := s.tracer.ProgramRuns()
	return runs
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

// The kernel counts our programs' run time for one second in every
// minute, half a minute in: enough for the cost line, at a small fraction
// of what counting all the time would cost. Not at the start: counting
// slows every program run, and a short trace is often one measurement.
const (
	sampleEvery  = time.Minute
	sampleAt     = 30 * time.Second
	sampleLength = time.Second
)

// sampleCost opens and closes the counting windows; Poll calls it.
func (s *Session) sampleCost() {
	in := s.Elapsed() % sampleEvery
	s.tracer.SampleStats(in >= sampleAt && in < sampleAt+sampleLength)
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

// Close detaches everything.
func (s *Session) Close() error { return s.tracer.Close() }
