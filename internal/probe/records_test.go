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

// roundTrip is a query as a backend sees it on its socket: the client's
// Query read, the ReadyForQuery sent back. This thread plays the backend.
func roundTrip(t testing.TB, text string) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	client, backend := fds[0], fds[1]
	n := len(text) + 5 // length word and NUL
	query := append([]byte{'Q', byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, text+"\x00"...)
	buf := make([]byte, 256)
	unix.Write(client, query)
	unix.Read(backend, buf)
	unix.Write(backend, []byte{'Z', 0, 0, 0, 5, 'I'})
	unix.Read(client, buf)
}

// A tracked process's round trip becomes one query record carrying its
// messages and its waterfall (track.go, records.go); a child it forks is
// tracked from birth, and its run is recorded when it exits.
func TestTrackedProcessRecords(t *testing.T) {
	testenv.NeedRoot(t)
	runtime.LockOSThread() // one thread: the backend's, whose first socket read is its client's
	defer runtime.UnlockOSThread()
	tr, err := Open(Wire|Sched, EmitAll)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	pid := os.Getpid()
	if err := tr.Track(pid, pid, true); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, "SELECT 'tracked'")
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

	child := exec.Command("true")
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
