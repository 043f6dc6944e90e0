package probe

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

// The verifier's work per program (instructions it processed) is a
// property of the code, not of the machine: a loop whose state it cannot
// prune multiplies it, slows every start and ends at its limit of 1M with
// the program rejected. Each program keeps a third of the limit in hand.
func TestVerifierHeadroom(t *testing.T) {
	testenv.NeedRoot(t)
	spec, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	// The knobs that turn code on (serve's), so the verifier sees it.
	for name, v := range map[string]any{"count_statements": uint8(1), "emit_sample": uint32(1 << 20)} {
		if err := spec.Variables[name].Set(v); err != nil {
			t.Fatal(err)
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats, LogSizeStart: 1 << 16}})
	if err != nil {
		t.Fatalf("loading: %v", err)
	}
	defer coll.Close()
	const budget = 666_666
	for name, p := range coll.Programs {
		log := p.VerifierLog
		i := strings.LastIndex(log, "processed ")
		if i < 0 {
			t.Fatalf("%s: no statistics in its verifier log %q", name, log)
		}
		n, err := strconv.Atoi(strings.Fields(log[i:])[1])
		if err != nil {
			t.Fatalf("%s: %q", name, log[i:])
		}
		if n > budget/4 {
			t.Logf("%s: %d instructions processed", name, n)
		}
		if n > budget {
			t.Errorf("%s: the verifier processed %d instructions, over %d", name, n, budget)
		}
	}
}
