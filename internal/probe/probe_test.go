package probe

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// The kernel's slot function and Go's must agree on every boundary.
func TestLog2SlotMatchesHist(t *testing.T) {
	testenv.NeedRoot(t)
	spec, err := loadDbiolat()
	if err != nil {
		t.Fatal(err)
	}
	prog, err := ebpf.NewProgram(spec.Programs["log2_slot_of"])
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

// Every program the tracer can attach loads and attaches on this kernel.
func TestOpenAttachesEverything(t *testing.T) {
	testenv.NeedRoot(t)
	tr, err := Open(All, EmitAll)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.links) == 0 {
		t.Fatal("no links")
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
