// Package probe loads the kernel programs, attaches them and reads what they
// collected. It knows nothing about databases: callers say which processes
// to track and which USDT sites mark a query.
//
// One file per concern: the program families (here), loading (load.go),
// attaching kernel hooks (attach.go) and USDT sites (usdt.go), tracking
// processes (track.go), reading records (records.go) and counters
// (counters.go), and the kernel's run-time statistics (runstats.go).
package probe

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Families selects which questions the tracer answers: a set of the
// family bits below. Process tracking and the lock probes are always on:
// every other family filters on the first, and the second costs nothing
// until a backend waits.
type Families uint

const (
	// PGWire takes query boundaries and text from the client protocol on the
	// backend's socket (tracepoints, no trap, simple and extended protocol).
	PGWire Families = 1 << iota
	// USDT takes them from PostgreSQL's query__start/done probes instead
	// (a uprobe trap each, simple protocol only, encrypted connections too).
	USDT
	FS    // file system syscalls, and the readahead they cause
	Block // block requests
	Sched // the waterfall: CPU, run queue, waits
	// Buffers counts shared-buffer hits and reads per query with a probe
	// on every buffer access: exact, but not cheap; never in All.
	Buffers
	// Fuse times the requests traced processes send to a userspace file
	// system; on when its daemon is tracked as a storage engine (with FS,
	// the daemon's work is charged to the query it serves).
	Fuse
	// MySQLWire takes query boundaries and text from MySQL's client/server
	// protocol on a MySQL or MariaDB server's connections, as PGWire does
	// from PostgreSQL's; on when such a server is traced with PGWire.
	MySQLWire
)

// Protocols are the families that read a database's client protocol on
// its sockets (tp_btf/sock_recv_length and sock_send_length, Linux 6.3).
const Protocols = PGWire | MySQLWire

// families names each family and the prefix of its programs' names (the
// functions in bpf/*.bpf.c): a program belongs to the family its name
// starts with, or to core.
var families = []struct {
	f            Families
	name, prefix string
}{
	{PGWire, "wire", "pgwire_"}, {USDT, "usdt", "usdt_"}, {FS, "fs", "fs_"}, {Block, "block", "blk_"},
	{Sched, "sched", "sched_"}, {Buffers, "buffers", "buffers_"}, {Fuse, "fuse", "fuse_"},
	{MySQLWire, "mysql-wire", "mysql_"},
}

// core are the prefixes of programs loaded whatever the families:
// process tracking, the lock probes, the reads I/O workers perform for a
// query, the self-tests of pure functions (selftest.bpf.c).
var core = []string{"proc_", "lock_", "aio_", "selftest_"}

// Default is what the tracing commands attach unless told more. File
// system syscalls are left out: a tracepoint on any syscall sends every
// syscall on the machine down the kernel's slow path (measured here: +50 ns
// on each, and about 450 ns on each read or write, where the perf
// tracepoint runs), which costs a busy database more than everything else
// together apart from the query probes themselves.
const Default = PGWire | Block | Sched

// All is every family but the costly Buffers (and USDT, the other source
// of what PGWire gives).
const All = PGWire | FS | Block | Sched

// familyOf names the family a program belongs to: 0 for core.
func familyOf(prog string) (Families, error) {
	for _, f := range families {
		if strings.HasPrefix(prog, f.prefix) {
			return f.f, nil
		}
	}
	for _, p := range core {
		if strings.HasPrefix(prog, p) {
			return 0, nil
		}
	}
	return 0, fmt.Errorf("program %s belongs to no family: name it after one (probe.families)", prog)
}

// uses says whether the families need a program: a core one, or one of theirs.
func (f Families) uses(prog string) bool {
	fam, err := familyOf(prog)
	return err == nil && (fam == 0 || f&fam != 0)
}

// Names lists the families switched on, for summaries.
func (f Families) Names() []string {
	var names []string
	for _, fam := range families {
		if f&fam.f != 0 {
			names = append(names, fam.name)
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
	StmtKey    = dbiolatStmtKey
	StmtTotals = dbiolatStmtTotals
	ProcRun    = dbiolatProcRun
	QueryAcct  = dbiolatQueryAcct
	IOAcct     = dbiolatIoAcct
	ProcIO     = dbiolatProcIo
	BlkKey     = dbiolatBlkKey
	BlkIO      = dbiolatBlkIo
	Hist       = dbiolatHist
	FSOp       = dbiolatFsOp
	BlkOp      = dbiolatBlkOp
	PooledFor  = dbiolatPooledFor
	ClientEnd  = dbiolatClientEnd
)

// WaitEventsOther is the wait event of a query's last slot when its
// others are full: the time of the events that found no slot.
const WaitEventsOther = 0xffffffff

// WaitClassMySQL marks the wait events that are MySQL's thd_wait_begin
// types (the type in the low byte), apart from PostgreSQL's.
const WaitClassMySQL = uint32(dbiolatWaitClassWAIT_CLASS_MYSQL)

// Names for the generated enum values, so callers read plainly.
const (
	FSRead  = dbiolatFsOpFS_READ
	FSWrite = dbiolatFsOpFS_WRITE
	FSSync  = dbiolatFsOpFS_SYNC
	// The reads again, split by the page cache: they add up to FSRead.
	FSReadHit  = dbiolatFsOpFS_READ_HIT
	FSReadMiss = dbiolatFsOpFS_READ_MISS
	FSAccts    = dbiolatFsOpFS_ACCTS
	BlkRead    = dbiolatBlkOpBLK_READ
	BlkWrite   = dbiolatBlkOpBLK_WRITE
	BlkOther   = dbiolatBlkOpBLK_OTHER

	OwnerTraced = dbiolatBlkOwnerOWNER_TRACED
	OwnerKernel = dbiolatBlkOwnerOWNER_KERNEL
	OwnerOther  = dbiolatBlkOwnerOWNER_OTHER

	TextSQL    = dbiolatTextKindTEXT_SQL
	TextPGWire = dbiolatTextKindTEXT_PG_WIRE
	TextMySQL  = dbiolatTextKindTEXT_MYSQL
	// A later part of a round trip's messages: its first TextSkip bytes end
	// the message the part before it ended inside.
	TextPGWirePart = dbiolatTextKindTEXT_PG_WIRE_PART

	EmitWanted    = dbiolatEmitFlagEMIT_WANTED
	EmitStatement = dbiolatEmitFlagEMIT_STATEMENT
	EmitFirst     = dbiolatEmitFlagEMIT_FIRST
	EmitCounted   = dbiolatEmitFlagEMIT_COUNTED
	EmitSampled   = dbiolatEmitFlagEMIT_SAMPLED

	StmtQueryID = uint16(dbiolatStmtKindSTMT_QUERY_ID)
	StmtSlotMin = int(dbiolatStmtSizeSTMT_SLOT_MIN)
	StmtAsk     = uint64(dbiolatStmtSizeSTMT_ASK)
)

// spec is the embedded object, parsed: each call a fresh copy, which
// loading may change (stubs, knobs).
func spec() (*ebpf.CollectionSpec, error) {
	s, err := loadDbiolat()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded BPF object: %w", err)
	}
	return s, nil
}
