package probe

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// The names Go shows are dbiolat.h's enum value names: lower case, no
// prefix, one per value, the count left out.
func TestKernelNames(t *testing.T) {
	stats, hists, boxes, err := KernelNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		names []string
		count int
		some  string
	}{
		{stats, int(dbiolatStatIdSTAT_IDS), "ringbuf_full"},
		{hists, int(dbiolatHistIdHIST_IDS), "fs_read_miss"},
		{boxes, int(dbiolatBoxBOXES), "io_wait"},
	} {
		if len(c.names) != c.count || !slices.Contains(c.names, c.some) {
			t.Errorf("names %v: want %d of them, %s among them", c.names, c.count, c.some)
		}
	}
	if hists[dbiolatHistIdHIST_BLK_READ_SIZE] != "blk_read_size" || boxes[dbiolatBoxBOX_CPU] != "cpu" {
		t.Errorf("names are not by value: %v %v", hists, boxes)
	}
}

// The kernel's slot function and Go's must agree on every boundary.
func TestLog2SlotMatchesHist(t *testing.T) {
	testenv.NeedRoot(t)
	s, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	prog, err := ebpf.NewProgram(s.Programs["selftest_log2_slot"])
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	values := []uint64{0, 1, 2, 3, math.MaxUint64}
	for k := 1; k < 64; k++ {
		values = append(values, 1<<k-1, 1<<k, 1<<k+1)
	}
	for _, v := range values {
		in := binary.LittleEndian.AppendUint64(nil, v)
		ret, err := prog.Run(&ebpf.RunOptions{Context: in})
		if err != nil {
			t.Fatal(err)
		}
		if int(ret) != hist.Slot(v) {
			t.Errorf("value %d: kernel slot %d, hist.Slot %d", v, ret, hist.Slot(v))
		}
	}
}

// eachEntry reads a map in growing batches: every entry once, however
// many, from none to more than a batch of the largest size holds.
func TestEachEntryReadsEveryEntryOnce(t *testing.T) {
	testenv.NeedRoot(t)
	for _, n := range []int{0, 1, firstBatch, firstBatch + 1, 3*lastBatch + 5} {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 1024})
		if err != nil {
			t.Fatal(err)
		}
		for k := range uint32(n) {
			if err := m.Put(k, uint64(k)*3); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[uint32]int{}
		err = eachEntry(m, func(k *uint32, v *uint64) {
			seen[*k]++
			if *v != uint64(*k)*3 {
				t.Errorf("%d entries: key %d read with value %d, want %d", n, *k, *v, uint64(*k)*3)
			}
		})
		m.Close()
		if err != nil {
			t.Fatalf("%d entries: %v", n, err)
		}
		if len(seen) != n {
			t.Errorf("%d entries: %d read", n, len(seen))
		}
		for k, times := range seen {
			if times != 1 || int(k) >= n {
				t.Errorf("%d entries: key %d read %d times", n, k, times)
			}
		}
	}
}
