package postgres

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"slices"

	"github.com/dbiolat/dbiolat/internal/elfvar"
	"github.com/dbiolat/dbiolat/internal/procfs"
)

// LWLock tranches past a version's built-in ones belong to extensions, and
// their names are in no table: pg_stat_activity names them from the
// process it runs in (GetLWTrancheName in lwlock.c), by the names
// registered there. An extension that asks for its locks at the server's
// start (RequestNamedLWLockTranche, as pg_stat_statements does) has its
// tranche registered in the postmaster, so in every backend it forks.
// They are read from the postmaster's memory, without connecting to the
// server.
//
// 15 to 18 keep them in an array the postmaster keeps in shared memory,
//
//	typedef struct NamedLWLockTranche { int trancheId; char *trancheName; } NamedLWLockTranche;
//
// which two exported variables describe (lwlock.h): the array,
// NamedLWLockTrancheArray, and its length, NamedLWLockTrancheRequests. A
// tranche an extension registers later in some backends only
// (LWLockNewTrancheId, LWLockRegisterTranche) is in their private memory:
// it stays "extension", as pg_stat_activity shows it to other backends.
//
// 19 keeps every extension tranche's name in shared memory, in a struct a
// static pointer of lwlock.c points to:
//
//	struct { struct { char name[NAMEDATALEN]; int num_lwlocks; } user_defined[256];
//	         int num_user_defined; slock_t lock; }
//
// tranche 100 its first entry. The pointer is found where the exported
// LWLockNewTrancheId, which appends a name, loads it: its first load of a
// pointer relative to the instruction pointer.
const (
	trancheArrayVariable = "NamedLWLockTrancheArray"
	trancheCountVariable = "NamedLWLockTrancheRequests"
	trancheEntrySize     = 16   // int, padding, pointer (x86-64)
	maxTranches          = 1024 // more would be a misread: each is an extension's request
	maxTrancheName       = 128  // read at most this much of a name (pg_stat_statements' is 18)

	trancheAppend       = "LWLockNewTrancheId" // 19: the function whose code says where the names are
	sharedTrancheFirst  = 100                  // 19: LWTRANCHE_FIRST_USER_DEFINED
	sharedTrancheName   = 64                   // 19: NAMEDATALEN
	sharedTrancheEntry  = 0x44                 // 19: a name and its number of locks
	sharedTrancheMax    = 256                  // 19: MAX_USER_DEFINED_TRANCHES
	sharedTrancheCount  = sharedTrancheMax * sharedTrancheEntry
	trancheAppendLength = 128 // bytes of its code searched for the load
)

// Tranches are the names of a server's extension LWLock tranches, by
// tranche id. They do not change while its postmaster runs: extensions ask
// for them at its start only.
type Tranches map[uint16]string

// ReadTranches reads a server's extension tranches from its postmaster's
// memory.
func ReadTranches(in Instance) (Tranches, error) {
	if in.Version >= 19 {
		return readSharedTranches(in)
	}
	pid := in.PID
	arrayAt, err := elfvar.Address(pid, in.Binary, trancheArrayVariable)
	if err != nil {
		return nil, err
	}
	countAt, err := elfvar.Address(pid, in.Binary, trancheCountVariable)
	if err != nil {
		return nil, err
	}
	mem, err := os.Open(procfs.Path(pid, "mem"))
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	var word [8]byte
	if _, err := mem.ReadAt(word[:], int64(arrayAt)); err != nil {
		return nil, fmt.Errorf("reading %s of PostgreSQL %d: %w", trancheArrayVariable, pid, err)
	}
	array := binary.LittleEndian.Uint64(word[:])
	if _, err := mem.ReadAt(word[:4], int64(countAt)); err != nil {
		return nil, fmt.Errorf("reading %s of PostgreSQL %d: %w", trancheCountVariable, pid, err)
	}
	count := int32(binary.LittleEndian.Uint32(word[:4]))
	if count <= 0 || array == 0 { // no extension asked for one
		return Tranches{}, nil
	}
	if count > maxTranches {
		return nil, fmt.Errorf("PostgreSQL %d: %d named LWLock tranches: not a count", pid, count)
	}
	entries := make([]byte, int(count)*trancheEntrySize)
	if _, err := mem.ReadAt(entries, int64(array)); err != nil {
		return nil, fmt.Errorf("reading the named LWLock tranches of PostgreSQL %d: %w", pid, err)
	}
	names := make(Tranches, count)
	name := make([]byte, maxTrancheName)
	for e := range slices.Chunk(entries, trancheEntrySize) {
		id := binary.LittleEndian.Uint32(e)
		at := binary.LittleEndian.Uint64(e[8:])
		// A name may end near the end of a mapping: what was read counts
		// if it holds the name's end.
		n, _ := mem.ReadAt(name, int64(at))
		end := bytes.IndexByte(name[:n], 0)
		if id > 0xFFFF || end <= 0 {
			continue
		}
		names[uint16(id)] = string(name[:end])
	}
	return names, nil
}

// readSharedTranches reads 19's extension tranches from shared memory,
// through the pointer LWLockNewTrancheId loads.
func readSharedTranches(in Instance) (Tranches, error) {
	fn, err := elfvar.FunctionAddress(in.PID, in.Binary, trancheAppend)
	if err != nil {
		return nil, err
	}
	mem, err := os.Open(procfs.Path(in.PID, "mem"))
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	code := make([]byte, trancheAppendLength)
	if _, err := mem.ReadAt(code, int64(fn)); err != nil {
		return nil, fmt.Errorf("reading %s of PostgreSQL %d: %w", trancheAppend, in.PID, err)
	}
	pointerAt, ok := ripLoad(code, fn)
	if !ok {
		return nil, fmt.Errorf("PostgreSQL %d: %s loads no pointer where 19's does", in.PID, trancheAppend)
	}
	var word [8]byte
	if _, err := mem.ReadAt(word[:], int64(pointerAt)); err != nil {
		return nil, fmt.Errorf("reading the tranches' pointer of PostgreSQL %d: %w", in.PID, err)
	}
	shared := binary.LittleEndian.Uint64(word[:])
	if shared == 0 {
		return nil, fmt.Errorf("PostgreSQL %d: its tranches are not in shared memory yet", in.PID)
	}
	if _, err := mem.ReadAt(word[:4], int64(shared+sharedTrancheCount)); err != nil {
		return nil, fmt.Errorf("reading the tranches of PostgreSQL %d: %w", in.PID, err)
	}
	count := int32(binary.LittleEndian.Uint32(word[:4]))
	if count < 0 || count > sharedTrancheMax {
		return nil, fmt.Errorf("PostgreSQL %d: %d extension tranches: not a count", in.PID, count)
	}
	entries := make([]byte, int(count)*sharedTrancheEntry)
	if _, err := mem.ReadAt(entries, int64(shared)); err != nil {
		return nil, fmt.Errorf("reading the tranches of PostgreSQL %d: %w", in.PID, err)
	}
	names := make(Tranches, count)
	for i, e := range slices.Collect(slices.Chunk(entries, sharedTrancheEntry)) {
		if end := bytes.IndexByte(e[:sharedTrancheName], 0); end > 0 {
			names[uint16(sharedTrancheFirst+i)] = string(e[:end])
		}
	}
	return names, nil
}

// ripLoad finds the first load of a 64-bit register from memory relative
// to the instruction pointer (mov disp32(%rip),%reg: REX.W, 0x8b, a
// ModRM of mod 00 and r/m 101) in code, which runs at address at, and
// returns the address it loads from.
func ripLoad(code []byte, at uint64) (uint64, bool) {
	for i := 0; i+7 <= len(code); i++ {
		if code[i]&0xfb == 0x48 && code[i+1] == 0x8b && code[i+2]&0xc7 == 0x05 {
			disp := int32(binary.LittleEndian.Uint32(code[i+3:]))
			return uint64(int64(at) + int64(i+7) + int64(disp)), true
		}
	}
	return 0, false
}
