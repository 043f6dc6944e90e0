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
// tranche registered in the postmaster, so in every backend it forks,
// from an array the postmaster keeps in shared memory,
//
//	typedef struct NamedLWLockTranche { int trancheId; char *trancheName; } NamedLWLockTranche;
//
// which two exported variables describe, in 15 to 18 alike (lwlock.h): the
// array, NamedLWLockTrancheArray, and its length, NamedLWLockTrancheRequests.
// 19 keeps the names in no exported variable: its extension tranches are
// named by their ids ("LWLock/extension (tranche 100)").
// They are read from the postmaster's memory, without connecting to the
// server. A tranche an extension registers later in some backends only
// (LWLockNewTrancheId, LWLockRegisterTranche) is in their private memory:
// it stays "extension", as pg_stat_activity shows it to other backends.
const (
	trancheArrayVariable = "NamedLWLockTrancheArray"
	trancheCountVariable = "NamedLWLockTrancheRequests"
	trancheEntrySize     = 16   // int, padding, pointer (x86-64)
	maxTranches          = 1024 // more would be a misread: each is an extension's request
	maxTrancheName       = 128  // read at most this much of a name (pg_stat_statements' is 18)
)

// Tranches are the names of a server's extension LWLock tranches, by
// tranche id. They do not change while its postmaster runs: extensions ask
// for them at its start only.
type Tranches map[uint16]string

// ReadTranches reads a server's extension tranches from its postmaster's
// memory.
func ReadTranches(in Instance) (Tranches, error) {
	pid := in.PID
	if in.Version >= 19 {
		return nil, fmt.Errorf("PostgreSQL %d keeps its extension tranches' names in no exported variable", in.Version)
	}
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
