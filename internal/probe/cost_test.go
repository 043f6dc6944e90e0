package probe

import (
	"os"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

// BenchmarkForeignSyscall measures what the file system tracepoints (--fs)
// cost a process that is not traced: once any syscall tracepoint is
// enabled, every syscall on the machine takes the kernel's slower tracing
// path, and a read or write, whose tracepoint has our program, pays for
// the perf tracepoint around it even when the program returns at once.
// Compare the sub-benchmarks of one run:
//
//	sudo go test -run '^$' -bench ForeignSyscall -count 5 ./internal/probe/
func BenchmarkForeignSyscall(b *testing.B) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	buf := []byte{0}
	b.Run("getppid", func(b *testing.B) {
		attachModes(b, FS, false, func() { syscall.Getppid() })
	})
	b.Run("pipe-write-read", func(b *testing.B) {
		attachModes(b, FS, false, func() { syscall.Write(int(w.Fd()), buf); syscall.Read(int(r.Fd()), buf) })
	})
}

// attachModes runs op untraced; with families attached but this process
// not tracked (what every other process of the machine pays); and, with
// tracked, tracked as a PostgreSQL client backend (what a traced query
// pays).
func attachModes(b *testing.B, families Families, tracked bool, op func()) {
	testenv.NeedRoot(b)
	runtime.LockOSThread() // one thread: its state is the backend's
	defer runtime.UnlockOSThread()
	modes := []string{"untraced", "attached"}
	if tracked {
		modes = append(modes, "tracked")
	}
	for _, mode := range modes {
		b.Run(mode, func(b *testing.B) {
			if mode != "untraced" {
				tr, err := Open(families, EmitNone)
				if err != nil {
					b.Fatal(err)
				}
				defer func() {
					b.StopTimer() // detaching waits for RCU: not the operation's cost
					tr.Close()
				}()
				if mode == "tracked" {
					if err := tr.Track(os.Getpid(), ProcInfo{Instance: os.Getpid()}, true); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				op()
			}
		})
	}
}

// BenchmarkRoundTrip is one query's round trip on the wire, as a backend
// sees it: the client's Query read, its ReadyForQuery sent back, over a
// unix socket pair. Tracked, each is a query begun and ended by pgwire.bpf.c.
//
//	sudo go test -run '^$' -bench RoundTrip -count 5 ./internal/probe/
func BenchmarkRoundTrip(b *testing.B) {
	sock, query := newClientSocket(b), queryMessage("SELECT 1;")
	attachModes(b, Default, true, func() { sock.roundTrip(query) })
}

// BenchmarkContextSwitch is two threads handing a byte back and forth
// through pipes: each hand-over a wakeup and context switches, which the
// scheduler hooks of the waterfall see.
func BenchmarkContextSwitch(b *testing.B) {
	var ping, pong [2]int
	if err := unix.Pipe(ping[:]); err != nil {
		b.Fatal(err)
	}
	if err := unix.Pipe(pong[:]); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { // the other thread: echoes until its pipe closes
		runtime.LockOSThread()
		buf := make([]byte, 1)
		for {
			if n, _ := unix.Read(ping[0], buf); n != 1 {
				close(done)
				return
			}
			unix.Write(pong[1], buf)
		}
	}()
	buf := []byte{0}
	attachModes(b, Default, true, func() {
		unix.Write(ping[1], buf)
		unix.Read(pong[0], buf)
	})
	unix.Close(ping[1])
	<-done
	unix.Close(ping[0])
	unix.Close(pong[0])
	unix.Close(pong[1])
}
