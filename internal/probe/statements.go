package probe

import (
	"errors"
	"fmt"
	"math"

	"github.com/cilium/ebpf"
)

// statementEntries sizes the kernel's statement table (stmts): an entry
// per statement identity and CPU that ran it, allocated as it fills.
// pg_stat_statements keeps 5,000 statements by default; 4,096 entries a
// CPU, for at most 16 CPUs, holds that many busy ones run on every CPU
// of most machines (about 600 bytes an entry). Past it, queries count
// together, under "other" (STAT_STMTS_FULL).
func statementEntries() uint32 {
	cpus, err := ebpf.PossibleCPU()
	if err != nil || cpus < 1 {
		cpus = 1
	}
	return 4096 * uint32(min(cpus, 16))
}

// StatementTable is what the kernel counted under each statement identity
// since it was loaded (Emit.Statements), or since the identity was
// evicted: its CPUs' entries added up (Cpu 0); what it counted together
// once its table was full; the table's entries and their bound.
type StatementTable struct {
	Totals            map[StmtKey]*StmtTotals
	Overflow          StmtTotals
	Entries, Capacity int
}

// Statements reads the kernel's statement table.
func (t *Tracer) Statements() (*StatementTable, error) {
	out := &StatementTable{Totals: map[StmtKey]*StmtTotals{}, Capacity: int(t.objs.Stmts.MaxEntries())}
	err := eachEntry(t.objs.Stmts, func(key *StmtKey, v *StmtTotals) {
		out.Entries++
		k := *key
		k.Cpu = 0
		if out.Totals[k] == nil {
			out.Totals[k] = &StmtTotals{}
		}
		out.Totals[k].Add(v)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the statements' totals: %w", err)
	}
	var perCPU []StmtTotals
	if err := t.objs.StmtOverflow.Lookup(uint32(0), &perCPU); err != nil {
		return nil, fmt.Errorf("reading the statements' overflow: %w", err)
	}
	for i := range perCPU {
		out.Overflow.Add(&perCPU[i])
	}
	return out, nil
}

// EvictStatements deletes identities (Cpu 0: on every CPU) from the
// kernel's table, to make room. A query of one that ends at the very
// moment of its deletion may go uncounted: evict only identities that have
// been idle a long while.
func (t *Tracer) EvictStatements(keys []StmtKey) error {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	for _, k := range keys {
		for cpu := range cpus {
			k.Cpu = uint16(cpu)
			if err := t.objs.Stmts.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("evicting a statement: %w", err)
			}
		}
	}
	return nil
}

// Add adds o's counts to s.
func (s *StmtTotals) Add(o *StmtTotals) { s.addTimes(o, 1) }

// Sub takes o's counts from s (o: s as it was before).
func (s *StmtTotals) Sub(o *StmtTotals) { s.addTimes(o, math.MaxUint64) }

// addTimes adds o's counts m times: m = 1 adds, m = MaxUint64 (-1 modulo
// 2^64) subtracts.
func (s *StmtTotals) addTimes(o *StmtTotals, m uint64) {
	s.Calls += m * o.Calls
	s.Ns += m * o.Ns
	for i := range s.BoxNs {
		s.BoxNs[i] += m * o.BoxNs[i]
	}
	for i := range s.Fs {
		s.Fs[i].Count += m * o.Fs[i].Count
		s.Fs[i].Bytes += m * o.Fs[i].Bytes
		s.Fs[i].Ns += m * o.Fs[i].Ns
	}
	for i := range s.Blk {
		s.Blk[i].Count += m * o.Blk[i].Count
		s.Blk[i].Bytes += m * o.Blk[i].Bytes
		s.Blk[i].Ns += m * o.Blk[i].Ns
	}
	s.BlkBusyNs += m * o.BlkBusyNs
	s.BlkQueueNs += m * o.BlkQueueNs
	s.BlkDeviceNs += m * o.BlkDeviceNs
	for i := range s.Slots {
		s.Slots[i] += m * o.Slots[i]
	}
}

// StmtSlot is the log2 slot (internal/hist) of a statement latency slot:
// the first holds all below, the last all above.
func StmtSlot(i int) int { return i + StmtSlotMin }

// AskStatements asks the kernel for a record of the next query of each
// of these identities (by their query id), whose first record Go did not
// get (the ring buffer was full).
func (t *Tracer) AskStatements(queryids []uint64) error {
	if len(queryids) == 0 {
		return nil
	}
	var ask [StmtAsk]uint8
	for _, id := range queryids {
		ask[id%StmtAsk] = 1
	}
	return t.objs.StmtAsk.Set(ask)
}
