package probe

import (
	"syscall"
	"testing"
)

// BenchmarkForeignSyscall measures what the file system tracepoints cost a
// process that is not traced: once any syscall tracepoint is enabled, every
// syscall on the machine takes the kernel's slower tracing path. Compare
// the two sub-benchmarks of one run:
//
//	sudo go test -run '^$' -bench ForeignSyscall -count 5 ./internal/probe/
func BenchmarkForeignSyscall(b *testing.B) {
	if !isRoot() {
		b.Skip("needs root for BPF")
	}
	b.Run("untraced", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			syscall.Getppid()
		}
	})
	b.Run("fs-tracepoints-attached", func(b *testing.B) {
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
			syscall.Getppid()
		}
	})
}
