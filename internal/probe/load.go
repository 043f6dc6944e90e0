package probe

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Tracer owns the loaded objects and every link; Close undoes all of it.
type Tracer struct {
	objs     dbiolatObjects
	names    kernelNames
	attached []*hookLink // every program's hooks, attached or paused
	paused   bool
	events   *ringbuf.Reader
	backlog  float64 // the share of events the last ReadQueries found filled
	runs     *ringbuf.Reader
	families Families               // loaded and attached
	dormant  Families               // loaded by Wake when needed
	spec     *ebpf.CollectionSpec   // every program as compiled, for Wake and the hooks
	data     *ebpf.Collection       // the global variables' maps (.rodata, .bss...), shared with Wake's programs
	specs    uint32                 // USDT specs written so far (cookie of the next site)
	progs    map[*ebpf.Program]bool // the programs attached, for their run-time statistics
	sample   statsSample
	binaries map[attachedTo]bool // binaries whose USDT probes or functions are attached
	// What NewProcs saw last: the kernel's count of forks into procs, and
	// whether Track added to it since.
	procsForked uint64
	tracked     bool
	// uprobeMulti: USDT sites are attached as one uprobe_multi link per
	// probe (Linux 6.6+), which needs no CAP_SYS_ADMIN, unlike a perf
	// event per site.
	uprobeMulti bool
}

// attachedTo is a binary, by its file's identity, and what of it is attached.
type attachedTo struct {
	dev, ino uint64
	what     string // "usdt", "aio"
}

// attachment names what of a binary is to be attached: a process running
// a file attached already (a restarted server) needs nothing more.
func attachment(binary, what string) (attachedTo, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(binary, &st); err != nil {
		return attachedTo{}, fmt.Errorf("opening %s: %w", binary, err)
	}
	return attachedTo{st.Dev, st.Ino, what}, nil
}

// Emit chooses which finished queries become records; every query counts
// in the query histogram either way. The kernel applies it, so queries
// nobody will see cost no copy and no wakeup.
type Emit struct {
	MinQuery time.Duration // queries at least this long; negative: off
	MinFS    time.Duration // queries with at least this much file system time; negative: off
	IfIO     bool          // queries that did any file system or block I/O
	// Statements counts every query in the kernel under its statement's
	// identity (Tracer.Statements): a query is a record only when chosen
	// (above, Sample), when it is the first of its identity on a CPU (it
	// names the identity), and when no identity counts it (Go counts it).
	Statements bool
	Sample     float64 // a share of the queries sent too, drawn at random (0 to 1)
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

// Open loads the programs of the chosen families and attaches their kernel
// hooks. USDT sites are attached per binary with AttachUSDT.
func Open(f Families, emit Emit) (*Tracer, error) { return Load(f, 0, emit) }

// Load is Open with dormant families: Wake loads and attaches them once
// they have something to trace (a server of their protocol that started,
// a storage engine found). Until then they cost nothing, not even the
// verifier's time (MySQL's protocol programs: about a second).
func Load(f, dormant Families, emit Emit) (*Tracer, error) {
	// RemoveMemlock's first bpf() call is the first this process makes:
	// refused, it is most often a container's seccomp profile.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("the kernel refuses BPF to this process (%v): it needs CAP_BPF and CAP_PERFMON and, in a container, a seccomp profile that allows bpf() (the runtime's default does not: see deploy/README.md)", err)
	}
	spec, err := spec()
	if err != nil {
		return nil, err
	}
	if !kernelHas("btf_trace_sock_recv_length") {
		if f&Protocols != 0 {
			return nil, errors.New("this kernel has no socket tracepoints sock_recv_length and sock_send_length (Linux 6.3 or later): --usdt takes queries from PostgreSQL's USDT probes instead")
		}
		dormant &^= Protocols
	}
	t := &Tracer{binaries: map[attachedTo]bool{}, families: f, dormant: dormant &^ f, spec: spec, progs: map[*ebpf.Program]bool{},
		uprobeMulti: features.HaveBPFLinkUprobeMulti() == nil}
	if t.names, err = readKernelNames(spec); err != nil {
		return nil, err
	}
	for name, v := range map[string]any{
		"emit_min_query_ns": threshold(emit.MinQuery),
		"emit_min_fs_ns":    threshold(emit.MinFS),
		"emit_if_io":        map[bool]uint8{false: 0, true: 1}[emit.IfIO],
		"count_statements":  map[bool]uint8{false: 0, true: 1}[emit.Statements],
		"emit_sample":       uint32(min(1, max(0, emit.Sample)) * math.MaxUint32),
		"rqf_flush_seq":     flushSeqFlag(),
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	if emit.Statements {
		spec.Maps["stmts"].MaxEntries = statementEntries()
	}
	t.spec = spec.Copy()
	// Programs of families left off are not loaded, so a kernel without
	// their hooks runs the others; a stub takes their place in t.objs.
	if t.data, err = t.load(spec, f, true, nil); err != nil {
		return nil, err
	}
	if err := t.data.Assign(&t.objs.dbiolatMaps); err != nil {
		t.Close()
		return nil, err
	}
	if err := t.data.Assign(&t.objs.dbiolatVariables); err != nil {
		t.Close()
		return nil, err
	}
	if err := t.freeAllSlots(); err != nil {
		t.Close()
		return nil, err
	}
	if err := t.attachHooks(t.families, true); err != nil {
		t.Close()
		return nil, err
	}
	if t.events, err = ringbuf.NewReader(t.objs.Events); err != nil {
		t.Close()
		return nil, fmt.Errorf("opening the ring buffer: %w", err)
	}
	if t.runs, err = ringbuf.NewReader(t.objs.ProcRuns); err != nil {
		t.Close()
		return nil, fmt.Errorf("opening the ring buffer: %w", err)
	}
	return t, nil
}

// emptyPrograms: every program returns at once, as on bench/overhead's
// hooks-floor, while the process runs as ever: its config serve-empty,
// which tells serve's programs' work from the rest of its cost (its
// process, its hooks' dispatch, its uprobes' traps). Not for users.
var emptyPrograms = os.Getenv("DBIOLAT_BENCH_EMPTY_PROGRAMS") == "1"

// returnAtOnce is the body of a program that does nothing: a stub's, or
// every program's with emptyPrograms.
func returnAtOnce() asm.Instructions {
	return asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
}

// load loads the programs of the families (and the core's, with core),
// stubs in place of the others, and moves them into t.objs; with shared,
// it uses those maps instead of making its own. What it returns holds
// what t.objs has no field for: the global variables' maps.
func (t *Tracer) load(spec *ebpf.CollectionSpec, f Families, core bool, shared map[string]*ebpf.Map) (*ebpf.Collection, error) {
	for name, ps := range spec.Programs {
		fam, _ := familyOf(name)
		switch {
		case fam&f == 0 && (fam != 0 || !core):
			spec.Programs[name] = &ebpf.ProgramSpec{Name: name, Type: ebpf.SocketFilter, License: "GPL", Instructions: returnAtOnce()}
		case (ps.SectionName == "uprobe" || ps.SectionName == "uretprobe") && t.uprobeMulti:
			ps.AttachType = ebpf.AttachTraceUprobeMulti
		}
		if emptyPrograms {
			spec.Programs[name].Instructions = returnAtOnce()
		}
	}
	for name := range spec.Maps {
		if _, ok := shared[name]; shared != nil && !ok {
			return nil, fmt.Errorf("loading BPF programs: map %s has nothing to share", name)
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: shared})
	var verr *ebpf.VerifierError
	switch {
	case errors.As(err, &verr):
		return nil, fmt.Errorf("the kernel rejected a BPF program: %+v", verr)
	case err != nil:
		return nil, fmt.Errorf("loading BPF programs: %w", err)
	}
	// The family's programs replace their stubs in t.objs.
	progs := reflect.ValueOf(&t.objs.dbiolatPrograms).Elem()
	for i := 0; i < progs.NumField(); i++ {
		name := progs.Type().Field(i).Tag.Get("ebpf")
		fam, _ := familyOf(name)
		if p := coll.DetachProgram(name); p != nil && (fam&f != 0 || shared == nil) {
			if old, _ := progs.Field(i).Interface().(*ebpf.Program); old != nil {
				old.Close()
			}
			progs.Field(i).Set(reflect.ValueOf(p))
		} else if p != nil {
			p.Close()
		}
	}
	return coll, nil
}

// flushSeqFlag is the kernel's RQF_FLUSH_SEQ, the mark of a block request
// in a flush sequence (block.bpf.c). Linux 6.11 turned the request flags'
// macros (this one bit 4) into an enum, named rqf_flags in most builds but
// anonymous in some, where CO-RE cannot find it: hence a knob, and a walk
// of every type (a quarter second) only for those. 0: not found.
func flushSeqFlag() uint32 {
	const name = "__RQF_FLUSH_SEQ"
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return 0
	}
	bit := func(e *btf.Enum) (uint32, bool) {
		for _, v := range e.Values {
			if v.Name == name {
				return 1 << v.Value, true
			}
		}
		return 0, false
	}
	var named *btf.Enum
	if spec.TypeByName("rqf_flags", &named) == nil {
		f, _ := bit(named)
		return f
	}
	var u unix.Utsname
	var major, minor int
	if unix.Uname(&u) == nil {
		fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	}
	if major < 6 || major == 6 && minor < 11 {
		return 1 << 4
	}
	for typ, err := range spec.All() {
		if err != nil {
			return 0
		}
		if e, ok := typ.(*btf.Enum); ok && e.Name == "" {
			if f, ok := bit(e); ok {
				return f
			}
		}
	}
	return 0
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

// Detach stops the programs from running; the maps and ring buffers stay
// readable. Safe to call more than once.
func (t *Tracer) Detach() error {
	var links []link.Link
	for _, a := range t.attached {
		if a.link != nil {
			links = append(links, a.link)
		}
	}
	t.attached = nil
	return closeAll(links)
}

// Close detaches everything and frees the maps. Safe to call more than once.
func (t *Tracer) Close() error {
	errs := []error{t.Detach()}
	for _, r := range []**ringbuf.Reader{&t.events, &t.runs} {
		if *r != nil {
			errs = append(errs, (*r).Close())
			*r = nil
		}
	}
	errs = append(errs, t.objs.Close())
	if t.data != nil {
		t.data.Close()
		t.data = nil
	}
	if t.sample.on != nil {
		errs = append(errs, t.sample.on.Close())
		t.sample.on = nil
	}
	return errors.Join(errs...)
}
