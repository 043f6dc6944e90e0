package probe

import (
	"os"
	"runtime"
	"testing"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

// In a window of the kernel's statistics our programs' runs are counted,
// by program; outside one, nothing more is.
func TestSampleStatsCountsOurPrograms(t *testing.T) {
	testenv.NeedRoot(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tr, err := Open(PGWire, EmitNone)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Track(os.Getpid(), ProcInfo{Instance: os.Getpid()}, true); err != nil {
		t.Fatal(err)
	}
	if err := tr.SampleStats(true); err != nil {
		t.Fatal(err)
	}
	const trips = 50
	sock, query := newClientSocket(t), queryMessage("SELECT 1")
	for i := 0; i < trips; i++ {
		sock.roundTrip(query)
	}
	if err := tr.SampleStats(false); err != nil {
		t.Fatal(err)
	}
	sock.roundTrip(query) // after the window: not counted
	stats, secs, err := tr.ProgramStats()
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]uint64{}
	for _, s := range stats {
		runs[s.Name] = s.Runs
	}
	// Each trip reads twice and sends twice, in this process; other
	// processes' socket calls run the programs too.
	if runs["pgwire_recv"] < 2*trips || runs["pgwire_send"] < 2*trips || secs <= 0 {
		t.Errorf("in %.3fs counted %v, want at least %d runs of pgwire_recv and pgwire_send", secs, runs, 2*trips)
	}
}
