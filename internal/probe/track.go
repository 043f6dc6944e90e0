package probe

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Track makes the kernel side trace process tgid (its threads, and every
// child it forks from now on) as part of the instance identified by its
// postmaster pid; client says it serves a client connection, whose
// protocol the Wire family reads. A process that exits meanwhile is skipped.
func (t *Tracer) Track(tgid, instance int, client bool) error {
	info := dbiolatProcInfo{Instance: uint32(instance)}
	if err := t.objs.Procs.Update(uint32(tgid), info, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("tracking pid %d: %w", tgid, err)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", tgid))
	if err != nil { // gone already: its exit will not remove the entry
		t.objs.Procs.Delete(uint32(tgid))
		return nil
	}
	for _, task := range tasks {
		tid, err := strconv.ParseUint(task.Name(), 10, 32)
		if err != nil {
			continue
		}
		ts := dbiolatThreadState{Tgid: uint32(tgid)}
		err = t.objs.Threads.Update(uint32(tid), ts, ebpf.UpdateNoExist)
		if err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
			return fmt.Errorf("tracking thread %d of pid %d: %w", tid, tgid, err)
		}
		var tl dbiolatTaskLocal
		if client {
			tl.Wire.State = uint8(dbiolatWireStateWIRE_ATTACHED)
		}
		if err := t.setTaskLocal(int(tid), tl); err != nil {
			return fmt.Errorf("tracking thread %d of pid %d: %w", tid, tgid, err)
		}
	}
	return nil
}

// setTaskLocal creates a thread's task-local state; the kernel names the
// task by a pidfd. A thread that is gone is skipped.
func (t *Tracer) setTaskLocal(tid int, tl dbiolatTaskLocal) error {
	fd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("opening a pidfd: %w", err)
	}
	defer unix.Close(fd)
	if err := t.objs.Tasks.Update(uint32(fd), tl, ebpf.UpdateNoExist); err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
		return fmt.Errorf("creating its task-local state: %w", err)
	}
	return nil
}

// Procs lists the processes the kernel side tracks now.
func (t *Tracer) Procs() ([]uint32, error) {
	var out []uint32
	var k uint32
	var v dbiolatProcInfo
	it := t.objs.Procs.Iterate()
	for it.Next(&k, &v) {
		out = append(out, k)
	}
	return out, it.Err()
}
