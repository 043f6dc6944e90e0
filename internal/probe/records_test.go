package probe

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

// clientSocket is a client's connection as its backend sees it; the
// thread that calls roundTrip plays the backend.
type clientSocket struct{ client, backend int }

func newClientSocket(tb testing.TB) *clientSocket {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return &clientSocket{fds[0], fds[1]}
}

// queryMessage is a simple-protocol Query message.
func queryMessage(text string) []byte {
	n := len(text) + 5 // the length word and the NUL
	return append([]byte{'Q', byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, text+"\x00"...)
}

// roundTrip is one query on the wire: the client's Query read by the
// backend, its ReadyForQuery sent back.
func (s *clientSocket) roundTrip(query []byte) {
	var buf [256]byte
	unix.Write(s.client, query)
	unix.Read(s.backend, buf[:])
	unix.Write(s.backend, []byte{'Z', 0, 0, 0, 5, 'I'})
	unix.Read(s.client, buf[:])
}

// A tracked process's round trip becomes one query record carrying its
// messages and its waterfall (track.go, records.go); a child it forks is
// tracked from birth, and its run is recorded when it exits.
func TestTrackedProcessRecords(t *testing.T) {
	testenv.NeedRoot(t)
	runtime.LockOSThread() // one thread: the backend's, whose first socket read is its client's
	defer runtime.UnlockOSThread()
	tr, err := Open(PGWire|Sched, EmitAll)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	pid := os.Getpid()
	if err := tr.Track(pid, ProcInfo{Instance: pid}, true); err != nil {
		t.Fatal(err)
	}
	newClientSocket(t).roundTrip(queryMessage("SELECT 'tracked'"))
	var texts []string
	var cpu uint64
	err = tr.ReadQueries(time.Now().Add(100*time.Millisecond), func(e *QueryEvent, text []byte) {
		if int(e.Tgid) == pid && e.TextKind == uint8(TextPGWire) {
			texts = append(texts, string(text))
			cpu = e.Acct.BoxNs[dbiolatBoxBOX_CPU]
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(texts) != 1 || len(texts[0]) < 5 || texts[0][0] != 'Q' || cpu == 0 {
		t.Fatalf("want one record with the Query message and some CPU, got %q (cpu %d ns)", texts, cpu)
	}

	// A child that runs across scheduler ticks: the kernel adds a running
	// task's CPU time to sum_exec_runtime at ticks and switches, so a
	// process whose whole life is one slice (`true`) exits with none yet.
	child := exec.Command("sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	var runs []ProcRun
	if err := tr.ReadProcRuns(func(r *ProcRun) { runs = append(runs, *r) }); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range runs {
		if int(r.Pid) == child.Process.Pid {
			found = int(r.Instance) == pid && r.EndNs > r.StartNs && r.CpuNs > 0
		}
	}
	if !found {
		t.Errorf("no run of the child %d, instance %d, with its times: %+v", child.Process.Pid, pid, runs)
	}
}
