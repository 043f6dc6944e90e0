package probe

import (
	"os"
	"syscall"
	"testing"
)

// The kernel memory the maps take is fixed at load (every map preallocated
// and sized) and stays within the budget the README states.
func TestMapMemoryBudget(t *testing.T) {
	needRoot(t)
	const budget = 32 << 20
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

// BenchmarkForeignSyscall measures what the file system tracepoints (--fs)
// cost a process that is not traced: once any syscall tracepoint is
// enabled, every syscall on the machine takes the kernel's slower tracing
// path, and a read or write, whose tracepoint has our program, pays for
// the perf tracepoint around it even when the program returns at once.
// Compare the sub-benchmarks of one run:
//
//	sudo go test -run '^$' -bench ForeignSyscall -count 5 ./internal/probe/
func BenchmarkForeignSyscall(b *testing.B) {
	if !isRoot() {
		b.Skip("needs root for BPF")
	}
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	buf := []byte{0}
	ops := []struct {
		name string
		op   func()
	}{
		{"getppid", func() { syscall.Getppid() }},
		{"pipe-write-read", func() { syscall.Write(int(w.Fd()), buf); syscall.Read(int(r.Fd()), buf) }},
	}
	for _, o := range ops {
		b.Run(o.name+"/untraced", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				o.op()
			}
		})
		b.Run(o.name+"/fs-tracepoints-attached", func(b *testing.B) {
			tr, err := Open(Families{FS: true}, EmitNone)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				b.StopTimer() // detaching waits for RCU: not the syscall's cost
				tr.Close()
			}()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				o.op()
			}
		})
	}
}
