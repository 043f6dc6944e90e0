package probe

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// kernelNames are the names of the values of dbiolat.h's enums that Go
// shows, by value: read from the object's BTF, so that dbiolat.h is their
// one definition. internal/model's catalog describes each name.
type kernelNames struct {
	stats, hists, boxes []string
}

// KernelNames lists, by value, the names of the kernel's drop counters
// (enum stat_id), histograms (enum hist_id) and waterfall boxes (enum box),
// for the tests that check them against internal/model's catalog.
func KernelNames() (stats, hists, boxes []string, err error) {
	spec, err := spec()
	if err != nil {
		return nil, nil, nil, err
	}
	n, err := readKernelNames(spec)
	return n.stats, n.hists, n.boxes, err
}

func readKernelNames(spec *ebpf.CollectionSpec) (kernelNames, error) {
	var n kernelNames
	var err error
	for _, e := range []struct {
		names        *[]string
		enum, prefix string
	}{{&n.stats, "stat_id", "STAT_"}, {&n.hists, "hist_id", "HIST_"}, {&n.boxes, "box", "BOX_"}} {
		if *e.names, err = enumNames(spec, e.enum, e.prefix); err != nil {
			return n, err
		}
	}
	return n, nil
}

// enumNames returns the names of an enum's values by value, lower case
// and without their prefix (HIST_FS_READ: "fs_read"). The enum's values
// must be 0..n-1 and its last value n, the count (HIST_IDS), which is left out.
func enumNames(spec *ebpf.CollectionSpec, enum, prefix string) ([]string, error) {
	var e *btf.Enum
	if err := spec.Types.TypeByName(enum, &e); err != nil {
		return nil, fmt.Errorf("enum %s in the BPF object: %w", enum, err)
	}
	vals := append([]btf.EnumValue(nil), e.Values...)
	sort.Slice(vals, func(i, j int) bool { return vals[i].Value < vals[j].Value })
	var names []string
	for i, v := range vals {
		if v.Value != uint64(i) {
			return nil, fmt.Errorf("enum %s: %s is %d, want %d (values 0..n, the last the count)", enum, v.Name, v.Value, i)
		}
		if i == len(vals)-1 {
			break // the count
		}
		name, ok := strings.CutPrefix(v.Name, prefix)
		if !ok {
			return nil, fmt.Errorf("enum %s: %s does not start with %s", enum, v.Name, prefix)
		}
		names = append(names, strings.ToLower(name))
	}
	return names, nil
}

// Stats returns the drop and note counters, summed over CPUs, by name.
func (t *Tracer) Stats() (map[string]uint64, error) {
	out := make(map[string]uint64, len(t.names.stats))
	var perCPU []uint64
	for id, name := range t.names.stats {
		if err := t.objs.Stats.Lookup(uint32(id), &perCPU); err != nil {
			return nil, fmt.Errorf("reading counter %s: %w", name, err)
		}
		for _, v := range perCPU {
			out[name] += v
		}
	}
	return out, nil
}

// Hists returns the in-kernel histograms, summed over CPUs, by name.
func (t *Tracer) Hists() (map[string]Hist, error) {
	out := make(map[string]Hist, len(t.names.hists))
	var perCPU []Hist
	for id, name := range t.names.hists {
		if err := t.objs.Hists.Lookup(uint32(id), &perCPU); err != nil {
			return nil, fmt.Errorf("reading histogram %s: %w", name, err)
		}
		var sum Hist
		for _, h := range perCPU {
			for i, v := range h.Slots {
				sum.Slots[i] += v
			}
			sum.Sum += h.Sum
		}
		out[name] = sum
	}
	return out, nil
}

// UnitHist names a unit's histogram: its unit (a process, or a MySQL
// thread) and the histogram's name.
type UnitHist struct {
	Unit uint32
	Name string
	id   uint32 // enum hist_id
}

// UnitHists returns the I/O histograms kept per unit, cumulative.
func (t *Tracer) UnitHists() (map[UnitHist]Hist, error) {
	out := map[UnitHist]Hist{}
	err := eachEntry(t.objs.UnitHists, func(k *dbiolatUnitHistKey, v *Hist) {
		if int(k.Id) < len(t.names.hists) {
			out[UnitHist{k.Unit, t.names.hists[k.Id], k.Id}] = *v
		}
	})
	if err != nil {
		return nil, fmt.Errorf("reading the histograms per process: %w", err)
	}
	return out, nil
}

// ForgetUnitHist drops a histogram of a unit that has exited, once read.
func (t *Tracer) ForgetUnitHist(h UnitHist) {
	_ = t.objs.UnitHists.Delete(dbiolatUnitHistKey{Unit: h.Unit, Id: h.id})
}

// WaitKey names a wait event: its code, numbered per database version.
type WaitKey = dbiolatWaitKey

// WaitHists returns the histogram of every wait event seen.
func (t *Tracer) WaitHists() (map[WaitKey]Hist, error) {
	out := map[WaitKey]Hist{}
	if err := eachEntry(t.objs.WaitHists, func(k *WaitKey, v *Hist) { out[*k] = *v }); err != nil {
		return nil, fmt.Errorf("reading the wait event histograms: %w", err)
	}
	return out, nil
}

// BoxNames names the waterfall's boxes of QueryAcct.BoxNs, by index.
func (t *Tracer) BoxNames() []string { return t.names.boxes }

// ProcTotals returns cumulative file system counters per unit (a process,
// or a MySQL server's thread: thread_state.unit): those of its exited
// threads plus those of its live ones.
func (t *Tracer) ProcTotals() (map[uint32]ProcIO, error) {
	out := map[uint32]ProcIO{}
	if err := eachEntry(t.objs.ProcTotals, func(k *uint32, v *ProcIO) { out[*k] = *v }); err != nil {
		return nil, fmt.Errorf("reading process totals: %w", err)
	}
	err := t.eachThread(func(ts *dbiolatThreadState) {
		p := out[ts.Unit]
		for op := range p.Fs {
			p.Fs[op].Count += ts.FsTotal[op].Count
			p.Fs[op].Bytes += ts.FsTotal[op].Bytes
			p.Fs[op].Ns += ts.FsTotal[op].Ns
		}
		out[ts.Unit] = p
	})
	if err != nil {
		return nil, fmt.Errorf("reading the threads' totals: %w", err)
	}
	return out, nil
}

// ProcTotal returns the totals its exited threads left for a unit.
func (t *Tracer) ProcTotal(unit uint32) (ProcIO, bool) {
	var v ProcIO
	err := t.objs.ProcTotals.Lookup(unit, &v)
	return v, err == nil
}

// ForgetProc drops the totals of a unit that has exited, once read.
func (t *Tracer) ForgetProc(unit uint32) {
	_ = t.objs.ProcTotals.Delete(unit)
}

// BlkTotals returns cumulative block counters per device, owner and op.
func (t *Tracer) BlkTotals() (map[BlkKey]BlkIO, error) {
	out := map[BlkKey]BlkIO{}
	if err := eachEntry(t.objs.BlkTotals, func(k *BlkKey, v *BlkIO) { out[*k] = *v }); err != nil {
		return nil, fmt.Errorf("reading the block totals: %w", err)
	}
	return out, nil
}

// ForgetBlk drops the block totals of a process that has exited, once read.
func (t *Tracer) ForgetBlk(k BlkKey) {
	_ = t.objs.BlkTotals.Delete(k)
}

// MapEntries counts the entries of the maps whose size follows the traced
// processes and the I/O in flight: it must come back down when they end.
func (t *Tracer) MapEntries() (map[string]int, error) {
	out := map[string]int{}
	o := &t.objs
	for name, m := range map[string]*ebpf.Map{
		"procs": o.Procs, "threads": o.Threads, "inflight": o.Inflight, "proc_totals": o.ProcTotals, "blk_totals": o.BlkTotals, "unit_hists": o.UnitHists,
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

// MapBytes is the kernel memory our maps hold (all preallocated, so it
// does not grow while tracing), as the kernel accounts it. Task-local
// storage is left out: it grows with the traced threads (docs/overhead.md).
func (t *Tracer) MapBytes() uint64 {
	var sum uint64
	for _, m := range byName[*ebpf.Map](&t.objs.dbiolatMaps) {
		if m.Type() == ebpf.TaskStorage {
			continue
		}
		if info, err := m.Info(); err == nil {
			n, _ := info.Memlock()
			sum += n
		}
	}
	return sum
}

// UnitQueries is what a unit's live threads did since they were tracked
// (thread_state): the queries they began (query_seq, which tags their
// block requests), and the time and waterfall boxes of those measured
// whole.
type UnitQueries struct {
	Begun, Ns uint64
	BoxNs     [dbiolatBoxBOXES]uint64 // by enum box, as QueryAcct.BoxNs
}

// Queries returns each unit's UnitQueries: what top shows per backend
// when the kernel counts the queries themselves by statement
// (Emit.Statements). A thread that exited takes its figures with it.
func (t *Tracer) Queries() (map[uint32]UnitQueries, error) {
	out := map[uint32]UnitQueries{}
	err := t.eachThread(func(ts *dbiolatThreadState) {
		u := out[ts.Unit]
		u.Begun += ts.QuerySeq
		u.Ns += ts.QueriesNs
		for i, ns := range ts.QueriesBoxNs {
			u.BoxNs[i] += ns
		}
		out[ts.Unit] = u
	})
	if err != nil {
		return nil, fmt.Errorf("reading the threads' queries: %w", err)
	}
	return out, nil
}

// eachThread calls f with the state of every traced thread: the slots
// `threads` names, read in batches from the bottom of thread_states, where
// the slots in use stay (free_slots is last in, first out).
func (t *Tracer) eachThread(f func(*dbiolatThreadState)) error {
	used := map[uint32]uint32{} // slot: thread
	var top uint32
	if err := eachEntry(t.objs.Threads, func(tid, slot *uint32) {
		used[*slot] = *tid
		top = max(top, *slot)
	}); err != nil || len(used) == 0 {
		return err
	}
	size := min(firstBatch, int(top)+1)
	slots, states := make([]uint32, size), make([]dbiolatThreadState, size)
	var cursor ebpf.MapBatchCursor
	for read := uint32(0); read <= top; {
		n, err := t.objs.ThreadStates.BatchLookup(&cursor, slots, states, nil)
		for i := range n {
			if tid, ok := used[slots[i]]; ok && states[i].Tid == tid {
				f(&states[i])
			}
		}
		read += uint32(n)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if size < lastBatch && read <= top { // an array's batch is copied whole: no more than is left
			size = min(2*size, lastBatch, int(top-read)+1)
			slots, states = make([]uint32, size), make([]dbiolatThreadState, size)
		}
	}
	return nil
}

// A map is read in batches of firstBatch entries, then of twice as many
// each time up to lastBatch: most maps hold a few entries, and buffers of
// lastBatch for each were most of an idle serve's garbage (its collector,
// a quarter of its CPU).
const firstBatch, lastBatch = 16, 256

// eachEntry calls f with every entry of a hash map, read in batches: a
// syscall a batch, where an iteration takes two an entry (a busy server's
// threads are read every second).
func eachEntry[K, V any](m *ebpf.Map, f func(*K, *V)) error {
	keys, vals := make([]K, firstBatch), make([]V, firstBatch)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			f(&keys[i], &vals[i])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(keys) < lastBatch {
			keys, vals = make([]K, 2*len(keys)), make([]V, 2*len(vals))
		}
	}
}
