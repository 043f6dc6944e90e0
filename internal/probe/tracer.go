// Package probe loads the kernel programs, attaches them and reads what they
// collected. It knows nothing about databases: callers say which processes
// to track and which USDT sites mark a query.
package probe

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/dbiolat/dbiolat/internal/usdt"
)

// Families selects which questions the tracer answers. Process tracking is
// always on: every other family filters on it.
type Families struct {
	// Per-query records, their boundaries taken from one of two sources:
	// Wire reads the client protocol on the backend's socket (tracepoints,
	// no trap, simple and extended protocol); USDT uses PostgreSQL's
	// query__start/done (a uprobe trap each, simple protocol only, but
	// also on encrypted connections).
	Wire  bool
	USDT  bool
	FS    bool // file system syscalls
	Block bool // block requests
	Sched bool // the waterfall: CPU, run queue, waits
	// Buffers counts shared-buffer hits and reads per query with a probe
	// on every buffer access: exact, but not cheap; off in All.
	Buffers bool
}

// Default is what the tracing commands attach unless told more. File
// system syscalls are left out: a tracepoint on any syscall sends every
// syscall on the machine down the kernel's slow path (measured here: +50 ns
// on each, and about 450 ns on each read or write, where the perf
// tracepoint runs), which costs a busy database more than everything else
// together apart from the query probes themselves.
var Default = Families{Wire: true, Block: true, Sched: true}

// All is every family but the costly Buffers (and USDT, the other source
// of what Wire gives).
var All = Families{Wire: true, FS: true, Block: true, Sched: true}

// uses says whether the families need a program, by its name (the
// prefixes of the bpf/ files' programs).
func (f Families) uses(prog string) bool {
	switch {
	case strings.HasPrefix(prog, "wire_"):
		return f.Wire
	case strings.HasPrefix(prog, "query_"):
		return f.USDT
	case strings.HasPrefix(prog, "fs_"), strings.HasPrefix(prog, "ra_"):
		return f.FS
	case strings.HasPrefix(prog, "blk_"):
		return f.Block
	case prog == "sched_switch":
		return f.Sched
	case prog == "buffer_read_done":
		return f.Buffers
	}
	return true // process tracking, lock probes, the log2 self-test
}

// kernelHas says whether the kernel's BTF describes a type (a tracepoint's
// btf_trace_* typedef says the kernel has that tracepoint).
func kernelHas(typeName string) bool {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return true // let loading say what is wrong
	}
	_, err = spec.AnyTypeByName(typeName)
	return err == nil
}

// Names lists the families switched on, for summaries.
func (f Families) Names() []string {
	var names []string
	for _, n := range []struct {
		on   bool
		name string
	}{{f.Wire, "wire"}, {f.USDT, "usdt"}, {f.FS, "fs"}, {f.Block, "block"}, {f.Sched, "sched"}, {f.Buffers, "buffers"}} {
		if n.on {
			names = append(names, n.name)
		}
	}
	return names
}

// ProgramNames are the names of dbiolat's kernel programs as the kernel
// shows them (bpftool prog), to tell them apart from other tools'.
func ProgramNames() ([]string, error) {
	spec, err := loadDbiolat()
	if err != nil {
		return nil, err
	}
	var names []string
	for name := range spec.Programs {
		names = append(names, name[:min(len(name), unix.BPF_OBJ_NAME_LEN-1)])
	}
	return names, nil
}

// Types shared with the kernel side, generated from bpf/dbiolat.h.
type (
	QueryEvent = dbiolatQueryEvent
	ProcRun    = dbiolatProcRun
	QueryAcct  = dbiolatQueryAcct
	IOAcct     = dbiolatIoAcct
	ProcIO     = dbiolatProcIo
	BlkKey     = dbiolatBlkKey
	BlkIO      = dbiolatBlkIo
	Hist       = dbiolatHist
	HistID     = dbiolatHistId
	StatID     = dbiolatStatId
	FSOp       = dbiolatFsOp
)

// Tracer owns the loaded objects and every link; Close undoes all of it.
type Tracer struct {
	objs     dbiolatObjects
	links    []link.Link
	events   *ringbuf.Reader
	runs     *ringbuf.Reader
	families Families
	specs    uint32                 // USDT specs written so far (cookie of the next site)
	progs    map[*ebpf.Program]bool // the programs attached, for their run-time statistics
	sample   statsSample
	binaries map[[2]uint64]struct{} // (dev, inode) of binaries whose query probes are attached
	// uprobeMulti: USDT sites are attached as one uprobe_multi link per
	// probe (Linux 6.6+), which needs no CAP_SYS_ADMIN, unlike a perf
	// event per site.
	uprobeMulti bool
}

// Emit chooses which finished queries become records; every query counts
// in the query histogram either way. The kernel applies it, so queries
// nobody will see cost no copy and no wakeup.
type Emit struct {
	MinQuery time.Duration // queries at least this long; negative: off
	MinFS    time.Duration // queries with at least this much file system time; negative: off
	IfIO     bool          // queries that did any file system or block I/O
}

// Common choices.
var (
	EmitNone = Emit{MinQuery: -1, MinFS: -1}
	EmitAll  = Emit{MinQuery: 0, MinFS: -1}
)

func threshold(d time.Duration) uint64 {
	if d < 0 {
		return math.MaxUint64
	}
	return uint64(d)
}

// Open loads the programs and attaches the kernel tracepoints of the chosen
// families. USDT sites are attached per binary with AttachQueryProbes.
func Open(f Families, emit Emit) (*Tracer, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("lifting the memlock limit: %w", err)
	}
	spec, err := loadDbiolat()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded BPF object: %w", err)
	}
	if f.Wire && !kernelHas("btf_trace_sock_recv_length") {
		return nil, errors.New("this kernel has no socket tracepoints sock_recv_length and sock_send_length (Linux 6.3 or later): --usdt takes queries from PostgreSQL's USDT probes instead")
	}
	t := &Tracer{binaries: map[[2]uint64]struct{}{}, families: f, progs: map[*ebpf.Program]bool{},
		uprobeMulti: features.HaveBPFLinkUprobeMulti() == nil}
	// Programs of families left off are not loaded, so a kernel without
	// their hooks runs the others; a stub takes their place in t.objs.
	for name, ps := range spec.Programs {
		switch {
		case !f.uses(name):
			spec.Programs[name] = &ebpf.ProgramSpec{Name: name, Type: ebpf.SocketFilter, License: "GPL",
				Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}}
		case ps.SectionName == "uprobe" && t.uprobeMulti:
			ps.AttachType = ebpf.AttachTraceUprobeMulti
		}
	}
	for name, v := range map[string]any{
		"emit_min_query_ns": threshold(emit.MinQuery),
		"emit_min_fs_ns":    threshold(emit.MinFS),
		"emit_if_io":        map[bool]uint8{false: 0, true: 1}[emit.IfIO],
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("the kernel rejected a BPF program: %+v", verr)
		}
		return nil, fmt.Errorf("loading BPF programs: %w", err)
	}
	o := &t.objs
	type btfTP struct {
		on   bool
		prog *ebpf.Program
	}
	for _, p := range []btfTP{
		{true, o.ProcFork}, {true, o.ProcExit},
		{f.Block, o.BlkStart}, {f.Block, o.BlkIssue}, {f.Block, o.BlkDone},
		{f.Block, o.BlkBackmerge}, {f.Block, o.BlkFrontmerge},
		{f.Sched, o.SchedSwitch},
		{f.Wire, o.WireRecv}, {f.Wire, o.WireSend},
	} {
		if !p.on {
			continue
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: p.prog})
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("attaching %s: %w", p.prog, err)
		}
		t.add(l, p.prog)
	}
	if f.FS {
		if err := t.attachSyscalls(); err != nil {
			t.Close()
			return nil, err
		}
		for name, prog := range map[string]*ebpf.Program{"page_cache_sync_ra": o.RaSync, "page_cache_async_ra": o.RaAsync} {
			l, err := link.Tracepoint("readahead", name, prog, nil)
			if err != nil {
				t.Close()
				return nil, fmt.Errorf("attaching tracepoint readahead:%s: %w", name, err)
			}
			t.add(l, prog)
		}
	}
	if t.events, err = ringbuf.NewReader(o.Events); err != nil {
		t.Close()
		return nil, fmt.Errorf("opening the ring buffer: %w", err)
	}
	if t.runs, err = ringbuf.NewReader(o.ProcRuns); err != nil {
		t.Close()
		return nil, fmt.Errorf("opening the ring buffer: %w", err)
	}
	return t, nil
}

func (t *Tracer) add(l link.Link, prog *ebpf.Program) {
	t.links = append(t.links, l)
	t.progs[prog] = true
}

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

// ProgramRuns is how many times the kernel has run our programs, counted
// only while its BPF statistics are on (SampleStats, or a benchmark's),
// and how many runs it skipped, counted always: a program is skipped when
// it is already running on that CPU (interrupted, then hit again).
func (t *Tracer) ProgramRuns() (runs, skipped uint64) {
	for p := range t.progs {
		if st, err := p.Stats(); err == nil {
			runs += st.RunCount
			skipped += st.RecursionMisses
		}
	}
	return runs, skipped
}

// MapBytes is the kernel memory our maps hold (all preallocated, so it
// does not grow while tracing), as the kernel accounts it.
func (t *Tracer) MapBytes() uint64 {
	m := &t.objs.dbiolatMaps
	var sum uint64
	for _, mp := range []*ebpf.Map{m.BlkTotals, m.Events, m.Hists, m.Inflight, m.ProcRuns, m.ProcTotals, m.Procs,
		m.QueryScratch, m.Stats, m.Threads, m.UsdtSpecs} {
		if info, err := mp.Info(); err == nil {
			n, _ := info.Memlock()
			sum += n
		}
	}
	return sum
}

func (t *Tracer) attachSyscalls() error {
	o := &t.objs
	progs := map[string][2]*ebpf.Program{
		"read": {o.FsEnterRead, o.FsExitRead}, "readv": {o.FsEnterReadv, o.FsExitReadv},
		"pread64": {o.FsEnterPread64, o.FsExitPread64}, "preadv": {o.FsEnterPreadv, o.FsExitPreadv},
		"preadv2": {o.FsEnterPreadv2, o.FsExitPreadv2},
		"write":   {o.FsEnterWrite, o.FsExitWrite}, "writev": {o.FsEnterWritev, o.FsExitWritev},
		"pwrite64": {o.FsEnterPwrite64, o.FsExitPwrite64}, "pwritev": {o.FsEnterPwritev, o.FsExitPwritev},
		"pwritev2": {o.FsEnterPwritev2, o.FsExitPwritev2},
		"fsync":    {o.FsEnterFsync, o.FsExitFsync}, "fdatasync": {o.FsEnterFdatasync, o.FsExitFdatasync},
		"sync_file_range": {o.FsEnterSyncFileRange, o.FsExitSyncFileRange},
	}
	for name, p := range progs {
		for i, dir := range []string{"sys_enter_", "sys_exit_"} {
			l, err := link.Tracepoint("syscalls", dir+name, p[i], nil)
			if err != nil {
				return fmt.Errorf("attaching tracepoint syscalls:%s%s: %w", dir, name, err)
			}
			t.add(l, p[i])
		}
	}
	return nil
}

// Track makes the kernel side trace process tgid (its threads, and every
// child it forks from now on) as part of the instance identified by its
// postmaster pid; client says it serves a client connection, whose
// protocol the Wire family reads. A process that exits meanwhile is skipped.
func (t *Tracer) Track(tgid, instance int, client bool) error {
	info := dbiolatProcInfo{Instance: uint32(instance)}
	if err := t.objs.Procs.Update(uint32(tgid), info, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("tracking pid %d: %w", tgid, err)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", tgid))
	if err != nil { // gone already: its exit will not remove the entry
		t.objs.Procs.Delete(uint32(tgid))
		return nil
	}
	for _, task := range tasks {
		tid, err := strconv.ParseUint(task.Name(), 10, 32)
		if err != nil {
			continue
		}
		ts := dbiolatThreadState{Tgid: uint32(tgid)}
		err = t.objs.Threads.Update(uint32(tid), ts, ebpf.UpdateNoExist)
		if err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
			return fmt.Errorf("tracking thread %d of pid %d: %w", tid, tgid, err)
		}
		var tl dbiolatTaskLocal
		if client {
			tl.Wire.State = uint8(dbiolatWireStateWIRE_ATTACHED)
		}
		if err := t.setTaskLocal(int(tid), tl); err != nil {
			return fmt.Errorf("tracking thread %d of pid %d: %w", tid, tgid, err)
		}
	}
	return nil
}

// setTaskLocal creates a thread's task-local state; the kernel names the
// task by a pidfd. A thread that is gone is skipped.
func (t *Tracer) setTaskLocal(tid int, tl dbiolatTaskLocal) error {
	fd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("opening a pidfd: %w", err)
	}
	defer unix.Close(fd)
	if err := t.objs.Tasks.Update(uint32(fd), tl, ebpf.UpdateNoExist); err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
		return fmt.Errorf("creating its task-local state: %w", err)
	}
	return nil
}

// USDTProbes names the probes of a database binary that mark a query and
// its lock waits. The lock probes are optional: without them lock waits
// count as other waits.
type USDTProbes struct {
	Provider                string
	QueryStart, QueryDone   string
	LockStart, LockDone     string
	LWLockStart, LWLockDone string
	BufferReadDone          string // attached only with Families.Buffers
}

// AttachUSDT attaches the probes the families need at every site in the
// binary: the query probes with USDT, the buffer probe with Buffers, and
// the lock probes whenever the binary has them. The kernel attaches by
// inode, so all processes running the binary, now and later, are covered;
// a binary already attached is skipped. It returns the number of sites
// attached.
func (t *Tracer) AttachUSDT(binary string, p USDTProbes) (int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(binary, &st); err != nil {
		return 0, fmt.Errorf("opening %s: %w", binary, err)
	}
	key := [2]uint64{st.Dev, st.Ino}
	if _, ok := t.binaries[key]; ok {
		return 0, nil
	}
	probes, err := usdt.Open(binary)
	if err != nil {
		return 0, err
	}
	ex, err := link.OpenExecutable(binary)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", binary, err)
	}
	o := &t.objs
	n := 0
	for _, w := range []struct {
		name           string
		prog           *ebpf.Program
		want, required bool
	}{
		{p.QueryStart, o.QueryStart, t.families.USDT, true}, {p.QueryDone, o.QueryDone, t.families.USDT, true},
		{p.LockStart, o.LockWaitStart, true, false}, {p.LockDone, o.LockWaitDone, true, false},
		{p.LWLockStart, o.LwlockWaitStart, true, false}, {p.LWLockDone, o.LockWaitDone, true, false},
		{p.BufferReadDone, o.BufferReadDone, t.families.Buffers, true},
	} {
		if !w.want {
			continue
		}
		sites := usdt.Find(probes, p.Provider, w.name)
		if len(sites) == 0 && w.required {
			return n, fmt.Errorf("%s has no USDT probe %s:%s: %w", binary, p.Provider, w.name, ErrNoProbe)
		}
		var usable []usdt.Probe
		for _, site := range sites {
			if site.ArgErr == nil || w.required { // only the query probes read arguments
				usable = append(usable, site)
			}
		}
		if err := t.attachSites(ex, usable, w.prog); err != nil {
			return n, fmt.Errorf("attaching USDT %s:%s in %s: %w", p.Provider, w.name, binary, err)
		}
		n += len(usable)
	}
	t.binaries[key] = struct{}{}
	return n, nil
}

// ErrNoProbe says a binary lacks a USDT probe we need.
var ErrNoProbe = errors.New("probe missing")

// attachSites attaches prog at the sites of one probe, each with the
// cookie that names its argument spec in usdt_specs.
func (t *Tracer) attachSites(ex *link.Executable, sites []usdt.Probe, prog *ebpf.Program) error {
	if len(sites) == 0 {
		return nil
	}
	var multi link.UprobeMultiOptions
	for _, site := range sites {
		spec, err := specOf(site.Args)
		if err != nil {
			return err
		}
		cookie := t.specs
		if err := t.objs.UsdtSpecs.Update(cookie, spec, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("storing the argument spec (too many sites?): %w", err)
		}
		t.specs++
		if t.uprobeMulti {
			multi.Addresses = append(multi.Addresses, site.Location)
			multi.RefCtrOffsets = append(multi.RefCtrOffsets, site.Semaphore) // 0: none
			multi.Cookies = append(multi.Cookies, uint64(cookie))
			continue
		}
		l, err := ex.Uprobe("", prog, &link.UprobeOptions{Address: site.Location, RefCtrOffset: site.Semaphore, Cookie: uint64(cookie)})
		if err != nil {
			return err
		}
		t.add(l, prog)
	}
	if t.uprobeMulti {
		l, err := ex.UprobeMulti(nil, prog, &multi)
		if err != nil {
			return err
		}
		t.add(l, prog)
	}
	return nil
}

// specOf turns decoded USDT arguments into what usdt.bpf.h reads.
func specOf(args []usdt.Arg) (dbiolatUsdtSpec, error) {
	var s dbiolatUsdtSpec
	if len(args) > len(s.Args) {
		return s, fmt.Errorf("%d arguments, at most %d supported", len(args), len(s.Args))
	}
	for i, a := range args {
		b := &s.Args[i]
		switch a.Kind {
		case usdt.ArgConst:
			b.Kind = 0
		case usdt.ArgReg:
			b.Kind = 1
		case usdt.ArgRegDeref:
			b.Kind = 2
		}
		b.ValOff = a.Value
		b.RegOff = uint16(a.RegOffset)
		b.Bitshift = uint8(64 - 8*a.Size)
		if a.Signed {
			b.IsSigned = 1
		}
	}
	s.Nargs = uint32(len(args))
	return s, nil
}

// ReadQueries drains the ring buffer until it is empty or the deadline
// passes, calling fn for each record. The kernel side never wakes us, so
// the caller calls this on a timer.
func (t *Tracer) ReadQueries(deadline time.Time, fn func(e *QueryEvent, text []byte)) error {
	t.events.SetDeadline(deadline)
	var rec ringbuf.Record
	var e QueryEvent
	const hdr = int(unsafe.Offsetof(e.Text))
	for {
		if err := t.events.ReadInto(&rec); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ringbuf.ErrFlushed) {
				return nil
			}
			return fmt.Errorf("reading query records: %w", err)
		}
		if len(rec.RawSample) < hdr {
			continue
		}
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&e)), hdr), rec.RawSample[:hdr])
		text := rec.RawSample[hdr:]
		if int(e.TextLen) < len(text) {
			text = text[:e.TextLen]
		}
		fn(&e, text)
	}
}

// ReadProcRuns delivers the records of traced processes that exited since
// the last call, without waiting.
func (t *Tracer) ReadProcRuns(fn func(r *ProcRun)) error {
	t.runs.SetDeadline(time.Now())
	var rec ringbuf.Record
	var r ProcRun
	for {
		if err := t.runs.ReadInto(&rec); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ringbuf.ErrFlushed) {
				return nil
			}
			return fmt.Errorf("reading process records: %w", err)
		}
		if len(rec.RawSample) < int(unsafe.Sizeof(r)) {
			continue
		}
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)), rec.RawSample)
		fn(&r)
	}
}

// Procs lists the processes the kernel side tracks now.
func (t *Tracer) Procs() ([]uint32, error) {
	var out []uint32
	var k uint32
	var v dbiolatProcInfo
	it := t.objs.Procs.Iterate()
	for it.Next(&k, &v) {
		out = append(out, k)
	}
	return out, it.Err()
}

// MapEntries counts the entries of the maps whose size follows the traced
// processes and the I/O in flight: it must come back down when they end.
func (t *Tracer) MapEntries() (map[string]int, error) {
	out := map[string]int{}
	o := &t.objs
	for name, m := range map[string]*ebpf.Map{
		"procs": o.Procs, "threads": o.Threads, "inflight": o.Inflight, "proc_totals": o.ProcTotals, "blk_totals": o.BlkTotals,
	} {
		k, v := make([]byte, m.KeySize()), make([]byte, m.ValueSize())
		it := m.Iterate()
		for it.Next(k, v) {
			out[name]++
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("counting the entries of %s: %w", name, err)
		}
	}
	return out, nil
}

// Hists returns the in-kernel histograms, summed over CPUs.
func (t *Tracer) Hists() ([]Hist, error) {
	out := make([]Hist, dbiolatHistIdHIST_IDS)
	for id := range out {
		var perCPU []Hist
		if err := t.objs.Hists.Lookup(uint32(id), &perCPU); err != nil {
			return nil, fmt.Errorf("reading histogram %d: %w", id, err)
		}
		for _, h := range perCPU {
			for i, v := range h.Slots {
				out[id].Slots[i] += v
			}
			out[id].Sum += h.Sum
		}
	}
	return out, nil
}

// Stats returns the drop and anomaly counters, summed over CPUs.
func (t *Tracer) Stats() ([]uint64, error) {
	out := make([]uint64, dbiolatStatIdSTAT_IDS)
	for id := range out {
		var perCPU []uint64
		if err := t.objs.Stats.Lookup(uint32(id), &perCPU); err != nil {
			return nil, fmt.Errorf("reading counter %d: %w", id, err)
		}
		for _, v := range perCPU {
			out[id] += v
		}
	}
	return out, nil
}

// ProcTotals returns cumulative file system counters per process: those of
// its exited threads plus those of its live ones.
func (t *Tracer) ProcTotals() (map[uint32]ProcIO, error) {
	out := map[uint32]ProcIO{}
	var k uint32
	var v ProcIO
	it := t.objs.ProcTotals.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading process totals: %w", err)
	}
	var ts dbiolatThreadState
	it = t.objs.Threads.Iterate()
	for it.Next(&k, &ts) {
		p := out[ts.Tgid]
		for op := range p.Fs {
			p.Fs[op].Count += ts.FsTotal[op].Count
			p.Fs[op].Bytes += ts.FsTotal[op].Bytes
			p.Fs[op].Ns += ts.FsTotal[op].Ns
		}
		out[ts.Tgid] = p
	}
	return out, it.Err()
}

// ForgetBlk drops the block totals of a process that has exited, once read.
func (t *Tracer) ForgetBlk(k BlkKey) {
	_ = t.objs.BlkTotals.Delete(k)
}

// ProcTotal returns the totals its exited threads left for process tgid.
func (t *Tracer) ProcTotal(tgid uint32) (ProcIO, bool) {
	var v ProcIO
	err := t.objs.ProcTotals.Lookup(tgid, &v)
	return v, err == nil
}

// ForgetProc drops the totals of a process that has exited, once read.
func (t *Tracer) ForgetProc(tgid uint32) {
	_ = t.objs.ProcTotals.Delete(tgid)
}

// BlkTotals returns cumulative block counters per device, owner and op.
func (t *Tracer) BlkTotals() (map[BlkKey]BlkIO, error) {
	out := map[BlkKey]BlkIO{}
	var k BlkKey
	var v BlkIO
	it := t.objs.BlkTotals.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	return out, it.Err()
}

// Close detaches everything. Safe to call more than once.
func (t *Tracer) Close() error {
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	for _, r := range []**ringbuf.Reader{&t.events, &t.runs} {
		if *r != nil {
			errs = append(errs, (*r).Close())
			*r = nil
		}
	}
	errs = append(errs, t.objs.Close())
	if t.sample.on != nil {
		errs = append(errs, t.sample.on.Close())
		t.sample.on = nil
	}
	return errors.Join(errs...)
}

// Names for the generated enum values, so callers read plainly.
const (
	FSRead   = dbiolatFsOpFS_READ
	FSWrite  = dbiolatFsOpFS_WRITE
	FSSync   = dbiolatFsOpFS_SYNC
	BlkRead  = dbiolatBlkOpBLK_READ
	BlkWrite = dbiolatBlkOpBLK_WRITE
	BlkOther = dbiolatBlkOpBLK_OTHER

	OwnerTraced = dbiolatBlkOwnerOWNER_TRACED
	OwnerKernel = dbiolatBlkOwnerOWNER_KERNEL
	OwnerOther  = dbiolatBlkOwnerOWNER_OTHER

	HistFSRead       = dbiolatHistIdHIST_FS_READ
	HistFSWrite      = dbiolatHistIdHIST_FS_WRITE
	HistFSSync       = dbiolatHistIdHIST_FS_SYNC
	HistBlkRead      = dbiolatHistIdHIST_BLK_READ
	HistBlkWrite     = dbiolatHistIdHIST_BLK_WRITE
	HistBlkOther     = dbiolatHistIdHIST_BLK_OTHER
	HistQuery        = dbiolatHistIdHIST_QUERY
	HistRunq         = dbiolatHistIdHIST_RUNQ
	HistLock         = dbiolatHistIdHIST_LOCK
	HistReadHit      = dbiolatHistIdHIST_FS_READ_HIT
	HistReadMiss     = dbiolatHistIdHIST_FS_READ_MISS
	HistBlkReadSize  = dbiolatHistIdHIST_BLK_READ_SIZE
	HistBlkWriteSize = dbiolatHistIdHIST_BLK_WRITE_SIZE

	StatRingbufFull        = dbiolatStatIdSTAT_RINGBUF_FULL
	StatThreadsFull        = dbiolatStatIdSTAT_THREADS_FULL
	StatInflightFull       = dbiolatStatIdSTAT_INFLIGHT_FULL
	StatProcIOFull         = dbiolatStatIdSTAT_PROC_IO_FULL
	StatBlkIOFull          = dbiolatStatIdSTAT_BLK_IO_FULL
	StatQueryUnfinished    = dbiolatStatIdSTAT_QUERY_UNFINISHED
	StatQueryTextFault     = dbiolatStatIdSTAT_QUERY_TEXT_FAULT
	StatBlkLate            = dbiolatStatIdSTAT_BLK_LATE
	StatUSDTArgFault       = dbiolatStatIdSTAT_USDT_ARG_FAULT
	StatWaterfallFull      = dbiolatStatIdSTAT_WATERFALL_FULL
	StatProcRunsFull       = dbiolatStatIdSTAT_PROC_RUNS_FULL
	StatBlkMerges          = dbiolatStatIdSTAT_BLK_MERGES
	StatWireEncrypted      = dbiolatStatIdSTAT_WIRE_ENCRYPTED
	StatWireUnreadable     = dbiolatStatIdSTAT_WIRE_UNREADABLE
	StatWireUnseen         = dbiolatStatIdSTAT_WIRE_UNSEEN
	StatWaterfallMissed    = dbiolatStatIdSTAT_WATERFALL_MISSED
	StatWaterfallRecovered = dbiolatStatIdSTAT_WATERFALL_RECOVERED

	TextSQL    = dbiolatTextKindTEXT_SQL
	TextPGWire = dbiolatTextKindTEXT_PG_WIRE

	EmitWanted    = dbiolatEmitFlagEMIT_WANTED
	EmitStatement = dbiolatEmitFlagEMIT_STATEMENT
)
