package probe

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/dbiolat/dbiolat/internal/procfs"
)

// ProcInfo is what the kernel side knows of a traced process, and its
// children inherit: the instance it belongs to, and where it publishes
// its wait events.
type ProcInfo struct {
	Instance int // the postmaster's pid
	// WaitEventPtr is the address of the process's pointer to its
	// current wait event (PostgreSQL's my_wait_event_info); 0: unknown.
	WaitEventPtr uint64
	// ApplicationPtr is the address of the process's pointer to the name
	// of the application its client says it is (PostgreSQL's
	// application_name); 0: unknown. The kernel keeps it as an offset from
	// WaitEventPtr, a variable of the same executable: without that one,
	// or farther from it than 2 GiB, it is not read.
	ApplicationPtr uint64
	// StatusPtr is the address of the process's pointer to its status
	// entry (PostgreSQL's MyBEEntry, its PgBackendStatus), and QueryIDOffset
	// where the current statement's query id lies in that entry
	// (st_query_id, by major version); either 0: query ids are not read.
	// Kept as an offset from WaitEventPtr, as ApplicationPtr is.
	StatusPtr     uint64
	QueryIDOffset uint32
	// DatabaseOffset is where that entry keeps the backend's database
	// (st_databaseid): with the query id, a statement's identity
	// (CountStatements); 0: unknown.
	DatabaseOffset uint32
	// AIOWaitEvent is the wait event of waiting for asynchronous I/O that
	// another process does (PostgreSQL 18's IO/AioIoCompletion); 0: none.
	AIOWaitEvent uint32
	// Version is the database's major version, by which its wait events
	// are numbered.
	Version int
	// TLSProbed says its TLS library's reads and writes are probed
	// (AttachTLS): its TLS connections are read in plaintext.
	TLSProbed bool
	// Kind says what the process is: a PostgreSQL server's, a MySQL or
	// MariaDB server (any of its threads may serve a connection in
	// MySQL's protocol: the MySQLWire family), or a storage engine serving
	// the instance from user space (a FUSE daemon: its I/O is the layer
	// under the database's).
	Kind ProcKind
}

// ProcKind is what a traced process is (enum proc_kind).
type ProcKind uint32

const (
	PostgreSQL    = ProcKind(dbiolatProcKindPROC_POSTGRES)
	MySQL         = ProcKind(dbiolatProcKindPROC_MYSQL)
	StorageEngine = ProcKind(dbiolatProcKindPROC_STORAGE)
)

// Track makes the kernel side trace process tgid (its threads, and every
// child it forks from now on) as part of an instance; client says it
// serves a PostgreSQL client connection, whose protocol the PGWire family
// reads (a MySQL server's threads are told by p.Kind). A
// process that exits meanwhile is skipped.
func (t *Tracer) Track(tgid int, p ProcInfo, client bool) error {
	info := dbiolatProcInfo{Instance: uint32(p.Instance), WaitEventPtr: p.WaitEventPtr, AioWaitEvent: p.AIOWaitEvent,
		Version: uint32(p.Version), Kind: uint32(p.Kind)}
	if off := int64(p.ApplicationPtr - p.WaitEventPtr); p.ApplicationPtr != 0 && p.WaitEventPtr != 0 && off == int64(int32(off)) {
		info.ApplicationOff = int32(off)
	}
	if off := int64(p.StatusPtr - p.WaitEventPtr); p.StatusPtr != 0 && p.WaitEventPtr != 0 && off == int64(int32(off)) {
		info.StatusOff, info.QueryIdOff, info.DatabaseOff = int32(off), p.QueryIDOffset, p.DatabaseOffset
	}
	if p.TLSProbed {
		info.Flags |= uint32(dbiolatProcFlagPROC_TLS_PROBED)
	}
	if err := t.objs.Procs.Update(uint32(tgid), info, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("tracking pid %d: %w", tgid, err)
	}
	t.tracked = true
	tasks, err := procfs.Tasks(tgid)
	if err != nil { // gone already: its exit will not remove the entry
		t.objs.Procs.Delete(uint32(tgid))
		return nil
	}
	for _, tid := range tasks {
		ts := dbiolatThreadState{Tgid: uint32(tgid), Unit: uint32(tgid)}
		if p.Kind == MySQL { // a server's threads each have a role: each is a unit (as proc_fork makes them)
			ts.Unit = uint32(tid)
		}
		if p.Kind == StorageEngine { // as proc_fork marks its later threads
			ts.Engine, ts.TitleSeen = 1, 1
		}
		slot, err := t.addThread(uint32(tid), ts)
		if err != nil {
			return fmt.Errorf("tracking thread %d of pid %d: %w", tid, tgid, err)
		}
		tl := dbiolatTaskLocal{Kind: uint32(p.Kind), Instance: uint32(p.Instance), Slot: slot}
		if client && p.Kind != MySQL {
			tl.Wire.State = uint8(dbiolatWireStateWIRE_ATTACHED)
		}
		if err := t.setTaskLocal(tid, tl); err != nil {
			return fmt.Errorf("tracking thread %d of pid %d: %w", tid, tgid, err)
		}
	}
	return nil
}

// addThread gives thread tid a free slot of thread_states holding ts, as
// proc_fork does (proc.bpf.c), and returns the slot + 1; if the kernel gave
// it one meanwhile (the thread was born as we attached), that one.
func (t *Tracer) addThread(tid uint32, ts dbiolatThreadState) (uint32, error) {
	var slot, held uint32
	if err := t.objs.FreeSlots.LookupAndDelete(nil, &slot); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return 0, fmt.Errorf("%d threads are traced already, the most there is room for", t.objs.ThreadStates.MaxEntries())
		}
		return 0, fmt.Errorf("taking a free slot: %w", err)
	}
	ts.Tid = tid
	if err := t.objs.ThreadStates.Put(slot, ts); err != nil {
		return 0, fmt.Errorf("writing its state: %w", err)
	}
	err := t.objs.Threads.Update(tid, slot, ebpf.UpdateNoExist)
	if err == nil {
		return slot + 1, nil
	}
	_ = t.objs.ThreadStates.Put(slot, dbiolatThreadState{}) // the slot goes back free
	_ = t.objs.FreeSlots.Put(nil, slot)
	if !errors.Is(err, ebpf.ErrKeyExist) {
		return 0, fmt.Errorf("naming its slot: %w", err)
	}
	if err := t.objs.Threads.Lookup(tid, &held); err != nil { // it exited meanwhile
		return 0, nil
	}
	return held + 1, nil
}

// freeAllSlots makes every slot of thread_states free, at load.
func (t *Tracer) freeAllSlots() error {
	for slot := t.objs.ThreadStates.MaxEntries(); slot > 0; slot-- { // slot 0 on top: the first taken
		if err := t.objs.FreeSlots.Put(nil, slot-1); err != nil {
			return fmt.Errorf("making the threads' slots: %w", err)
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

// NewProcs lists the processes the kernel side tracks now, each with the
// server it belongs to (ProcInfo.Instance), if any was added since the
// last call (forked, or tracked by Track); else nil. A walk of the map
// visits its every bucket: ten times a second, it was a tenth of serve's
// CPU.
func (t *Tracer) NewProcs() (map[uint32]int, error) {
	var forked uint64
	if err := t.objs.ProcsForked.Get(&forked); err != nil {
		return nil, fmt.Errorf("reading the count of forks: %w", err)
	}
	if forked == t.procsForked && !t.tracked {
		return nil, nil
	}
	t.procsForked, t.tracked = forked, false
	out := map[uint32]int{}
	err := eachEntry(t.objs.Procs, func(k *uint32, v *dbiolatProcInfo) { out[*k] = int(v.Instance) })
	return out, err
}

// ProcServer is the server a tracked process belongs to (its pid), as
// the kernel tracks it; false: not tracked.
func (t *Tracer) ProcServer(pid uint32) (int, bool) {
	var v dbiolatProcInfo
	if err := t.objs.Procs.Lookup(pid, &v); err != nil {
		return 0, false
	}
	return int(v.Instance), true
}
