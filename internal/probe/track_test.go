package probe

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/dbiolat/dbiolat/internal/procfs"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// A traced thread holds a slot of thread_states from its birth (or Track)
// to its exit. This process is traced while threads are born and end in
// it and a child runs: each live thread has its state, each ended one
// none, and every slot is either free or a live thread's, none both, none
// twice, none lost.
func TestThreadSlots(t *testing.T) {
	testenv.NeedRoot(t)
	tr, err := Open(PGWire, EmitAll)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	pid := os.Getpid()
	tracked, err := procfs.Tasks(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Track(pid, ProcInfo{Instance: pid}, false); err != nil {
		t.Fatal(err)
	}

	// More goroutines locked to their threads at once than the process has
	// threads: some threads are born now, in the kernel's proc_fork; and
	// more than eachThread's first batch holds, so that it reads several.
	locked, release := make(chan int), make(chan struct{})
	n := max(len(tracked)+4, 3*firstBatch)
	for range n {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			locked <- unix.Gettid()
			<-release
		}()
	}
	tids := map[int]bool{}
	for range n {
		tids[<-locked] = true
	}
	held := heldSlots(t, tr)
	born := 0
	for tid := range tids {
		if _, ok := held[uint32(tid)]; !ok {
			t.Errorf("live thread %d has no state", tid)
		}
		if !slices.Contains(tracked, tid) {
			born++
		}
	}
	if born == 0 {
		t.Fatalf("none of %d locked threads was born after Track: the kernel's part went untested", n)
	}
	// eachThread reads every thread that held a slot before it, and none
	// that holds none after it (the runtime may start threads meanwhile).
	read := map[uint32]bool{}
	if err := tr.eachThread(func(ts *dbiolatThreadState) { read[ts.Tid] = true }); err != nil {
		t.Fatal(err)
	}
	after := heldSlots(t, tr)
	for tid := range held {
		if !read[tid] {
			t.Errorf("eachThread did not read thread %d, which holds a slot (%d read, %d held)", tid, len(read), len(held))
		}
	}
	for tid := range read {
		if _, ok := after[tid]; !ok {
			t.Errorf("eachThread read thread %d, which holds no slot", tid)
		}
	}
	if err := exec.Command("true").Run(); err != nil { // a child process: forked, traced, exited
		t.Fatal(err)
	}
	close(release)
	delete(tids, pid) // the main thread does not end with its goroutine: Go keeps it, wedged
	for tid := range tids {
		waitGone(t, fmt.Sprintf("/proc/%d/task/%d", pid, tid))
	}

	held = heldSlots(t, tr)
	for tid := range tids {
		if _, ok := held[uint32(tid)]; ok {
			t.Errorf("thread %d ended, yet holds a slot", tid)
		}
	}
	live, err := procfs.Tasks(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range live {
		if _, ok := held[uint32(tid)]; !ok {
			t.Errorf("live thread %d has no state", tid)
		}
	}
	owner := map[uint32]uint32{} // slot: thread
	for tid, slot := range held {
		if other, ok := owner[slot]; ok {
			t.Errorf("slot %d held by threads %d and %d", slot, other, tid)
		}
		owner[slot] = tid
	}
	free := 0
	for {
		var slot uint32
		if err := tr.objs.FreeSlots.LookupAndDelete(nil, &slot); errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if tid, ok := owner[slot]; ok {
			t.Errorf("slot %d is free, yet thread %d holds it", slot, tid)
		}
		owner[slot] = 0
		free++
	}
	if total := free + len(held); total != int(tr.objs.ThreadStates.MaxEntries()) || len(owner) != total {
		t.Errorf("%d slots free and %d held (%d distinct), of %d", free, len(held), len(owner), tr.objs.ThreadStates.MaxEntries())
	}
}

// heldSlots returns the slot each traced thread holds, checked to hold it.
func heldSlots(t *testing.T, tr *Tracer) map[uint32]uint32 {
	t.Helper()
	held := map[uint32]uint32{}
	if err := eachEntry(tr.objs.Threads, func(tid, slot *uint32) { held[*tid] = *slot }); err != nil {
		t.Fatal(err)
	}
	for tid, slot := range held {
		var ts dbiolatThreadState
		if err := tr.objs.ThreadStates.Lookup(slot, &ts); err != nil {
			t.Fatal(err)
		}
		if ts.Tid != tid {
			t.Errorf("thread %d's slot %d holds thread %d", tid, slot, ts.Tid)
		}
	}
	return held
}

// waitGone waits for a path to go: a thread's directory is removed after
// its exit ran (and with it the kernel's sched_process_exit hook).
func waitGone(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return
		}
	}
	t.Fatalf("%s still there after 30 s", path)
}
