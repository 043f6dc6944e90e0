package probe

import (
	"testing"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

// Every program the tracer can attach loads and attaches on this kernel,
// all families at once and each on its own (the others stubbed out).
func TestOpenAttachesEverything(t *testing.T) {
	testenv.NeedRoot(t)
	for _, f := range []Families{All | Buffers | USDT | MySQLWire, Wire, USDT, FS, Block, Sched, Buffers, MySQLWire} {
		tr, err := Open(f, EmitAll)
		if err != nil {
			t.Fatalf("%v: %v", f.Names(), err)
		}
		hs, err := Hooks(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.links) != len(hs) {
			t.Errorf("%v: %d links for %d hooks", f.Names(), len(tr.links), len(hs))
		}
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		if err := tr.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
}

// The kernel memory the maps take is fixed at load (every map preallocated
// and sized) and stays within the budget the README states.
func TestMapMemoryBudget(t *testing.T) {
	testenv.NeedRoot(t)
	const budget = 40 << 20
	tr, err := Open(All, EmitAll)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	n := tr.MapBytes()
	t.Logf("BPF maps: %d bytes (budget %d)", n, budget)
	if n == 0 || n > budget {
		t.Errorf("BPF maps take %d bytes, want some and at most %d", n, budget)
	}
}
