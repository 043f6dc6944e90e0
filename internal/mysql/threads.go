package mysql

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/dbiolat/dbiolat/internal/elfvar"
	"github.com/dbiolat/dbiolat/internal/procfs"
)

// The roles of a server's threads. MySQL (8.0 on) names its threads, and
// the name tells (threadNames). MariaDB does not (every one is
// "mariadbd") and does not export InnoDB's functions, so a thread is told
// by what its stack holds while it waits in a system call: return
// addresses into the server's exported functions, and the object it was
// started with.
const (
	RoleServer      = "mysqld"        // the main thread (it accepts connections), and the process
	RoleConnection  = "connection"    // runs a connection's commands (one per connection, or the thread pool's)
	RolePageCleaner = "page cleaner"  // InnoDB's page cleaner: flushes dirty pages
	RoleInnoDBTask  = "innodb worker" // InnoDB's task pool (MySQL: its other InnoDB threads): purge, page writes, the redo log, checkpoints
	RoleInnoDBAIO   = "innodb aio"    // waits for InnoDB's asynchronous I/O to complete (io_uring or libaio); MySQL's I/O threads, which read themselves without it
	RoleBackground  = "background"    // any other thread of the server
)

// threadNames: the names MySQL gives its threads (pthread_setname_np), by
// prefix; the first that matches wins, a name that matches none is a
// background thread's. A thread still named as the process is told by
// its stack.
var threadNames = []struct{ prefix, role string }{
	{"connection", RoleConnection},
	{"ib_pg_flush", RolePageCleaner}, // the page cleaners' coordinator and workers
	{"ib_io_", RoleInnoDBAIO},        // ib_io_rd-N, ib_io_wr-N, ib_io_ibuf
	{"ib_", RoleInnoDBTask},          // ib_log_writer, ib_log_checkpt, ib_srv_purge...
}

// stackRoles: a return address into one of these functions, on a waiting
// thread's stack, gives its role; the first that matches wins.
var stackRoles = []struct{ symbol, role string }{
	{"handle_one_connection", RoleConnection}, // one thread per connection (and its cache)
	{"_Z24do_handle_one_connectionP7CONNECTb", RoleConnection},
	{"_Z11tp_callbackP13TP_connection", RoleConnection}, // the thread pool, while it runs a command
	{"_ZN5tpool19thread_pool_generic11worker_mainEPNS_11worker_dataE", RoleInnoDBTask},
	{"_Z11mysqld_mainiPPc", RoleServer},
}

// threadStates: a thread started as a std::thread keeps the object that
// runs its function (its vtable is known by the function's type) as the
// argument of glibc's start_thread, at the top of its stack.
var threadStates = []struct{ vtable, role string }{
	// A std::thread of a function without arguments: in MariaDB 10.5 to
	// 11.x, only buf_flush_page_cleaner is started so.
	{"_ZTVNSt6thread11_State_implINS_8_InvokerISt5tupleIJPFvvEEEEEEE", RolePageCleaner},
	{"_ZTVNSt6thread11_State_implINS_8_InvokerISt5tupleIJMN5tpool19thread_pool_genericEFvPNS3_11worker_dataEEPS4_S6_EEEEEE", RoleInnoDBTask},
}

// The system calls a thread that reaps asynchronous I/O waits in.
const (
	sysIOGetevents  = 208 // libaio
	sysIOPgetevents = 333 // libaio 0.3.113 on
	sysIOUringEnter = 426
)

// Threads tells the roles of one server's threads.
type Threads struct {
	pid    int
	comm   string            // the process's name: a thread still so named is unnamed
	bias   uint64            // where the binary is loaded
	funcs  []span            // stackRoles' functions, at their file addresses
	states map[uint64]string // threadStates' vtables' first virtual function slot (vtable+16) -> role
}

type span struct {
	lo, hi uint64
	role   string
}

// NewThreads reads the server's symbols for ThreadRole.
func NewThreads(in Instance) (*Threads, error) {
	f, err := elf.Open(in.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", in.Binary, err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return nil, fmt.Errorf("reading the symbols of %s: %w", in.Binary, err)
	}
	byName := map[string]elf.Symbol{}
	for _, s := range syms {
		if s.Value != 0 {
			byName[s.Name] = s
		}
	}
	bias, err := elfvar.LoadBias(in.PID, in.Binary)
	if err != nil {
		return nil, fmt.Errorf("finding %s in process %d: %w", in.Binary, in.PID, err)
	}
	comm, _ := os.ReadFile(procfs.Path(in.PID, "comm"))
	t := &Threads{pid: in.PID, comm: strings.TrimSpace(string(comm)), bias: bias, states: map[uint64]string{}}
	for _, r := range stackRoles {
		if s, ok := byName[r.symbol]; ok && s.Size > 0 {
			t.funcs = append(t.funcs, span{s.Value, s.Value + s.Size, r.role})
		}
	}
	for _, r := range threadStates {
		if s, ok := byName[r.vtable]; ok {
			t.states[s.Value+16] = r.role // past the offset-to-top and typeinfo slots
		}
	}
	return t, nil
}

func mappingOf(maps []procfs.Mapping, addr uint64) (procfs.Mapping, bool) {
	for _, m := range maps {
		if addr >= m.Lo && addr < m.Hi {
			return m, true
		}
	}
	return procfs.Mapping{}, false
}

// The stack ThreadRole reads: from the stack pointer up, at most this
// much, and at its top (glibc's struct pthread: the start routine's
// argument) this much for thread objects.
const (
	stackScanMax = 256 << 10
	stackTopScan = 2 << 10
)

// ThreadRole tells what thread tid of the server is; false when it cannot
// tell now: the thread runs (its stack is read while it waits in a system
// call) or is gone.
func (t *Threads) ThreadRole(tid int) (string, bool) {
	comm, err := os.ReadFile(procfs.Path(t.pid, "task", tid, "comm"))
	if err != nil {
		return "", false
	}
	if name := strings.TrimSpace(string(comm)); name != t.comm {
		for _, n := range threadNames {
			if strings.HasPrefix(name, n.prefix) {
				return n.role, true
			}
		}
		return RoleBackground, true
	}
	sc, err := os.ReadFile(procfs.Path(t.pid, "task", tid, "syscall"))
	if err != nil {
		return "", false
	}
	fl := strings.Fields(string(sc)) // "nr arg1 … arg6 sp pc", or "running"
	if len(fl) < 3 {
		return "", false
	}
	nr, err1 := strconv.ParseInt(fl[0], 10, 64)
	sp, err2 := strconv.ParseUint(strings.TrimPrefix(fl[len(fl)-2], "0x"), 16, 64)
	if err1 != nil || err2 != nil || nr < 0 {
		return "", false
	}
	maps, err := procfs.Maps(t.pid)
	if err != nil {
		return "", false
	}
	stack, ok := mappingOf(maps, sp)
	if !ok {
		return "", false
	}
	mem, err := os.Open(procfs.Path(t.pid, "mem"))
	if err != nil {
		return "", false
	}
	defer mem.Close()
	end := min(stack.Hi, sp+stackScanMax)
	buf := make([]byte, end-sp)
	if _, err := mem.ReadAt(buf, int64(sp)); err != nil {
		return "", false
	}
	best := len(t.funcs)
	for i := 0; i+8 <= len(buf); i += 8 {
		w := binary.LittleEndian.Uint64(buf[i:]) - t.bias
		for j := 0; j < best; j++ {
			if w >= t.funcs[j].lo && w < t.funcs[j].hi {
				best = j
				break
			}
		}
	}
	if best < len(t.funcs) {
		return t.funcs[best].role, true
	}
	if role := t.threadObject(mem, maps, buf[max(0, len(buf)-stackTopScan):]); role != "" {
		return role, true
	}
	if nr == sysIOUringEnter || nr == sysIOGetevents || nr == sysIOPgetevents {
		return RoleInnoDBAIO, true
	}
	return RoleBackground, true
}

// threadObject finds, among the words of top, a pointer to an object whose
// vtable is one of threadStates'.
func (t *Threads) threadObject(mem *os.File, maps []procfs.Mapping, top []byte) string {
	var word [8]byte
	for i := 0; i+8 <= len(top); i += 8 {
		p := binary.LittleEndian.Uint64(top[i:])
		if m, ok := mappingOf(maps, p); !ok || !strings.HasPrefix(m.Perms, "rw") || (m.Path != "" && m.Path != "[heap]") {
			continue // objects live in the heap: anonymous, writable
		}
		if _, err := mem.ReadAt(word[:], int64(p)); err != nil {
			continue
		}
		if role, ok := t.states[binary.LittleEndian.Uint64(word[:])-t.bias]; ok {
			return role
		}
	}
	return ""
}
