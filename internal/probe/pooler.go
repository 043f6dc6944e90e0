package probe

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/link"

	"github.com/dbiolat/dbiolat/internal/procfs"
)

// Pooler is the kind of a connection pooler's threads (pgbouncer): not
// traced as a database's, only followed for which client each request it
// forwards to a server comes from (pooler.bpf.h).
const Pooler = ProcKind(dbiolatProcKindPROC_POOLER)

// PoolerSend is the function of the C library a pooler sends with:
// ssize_t send(int fd, const void *buf, size_t len, int flags).
const PoolerSend = "send"

// TrackPooler follows the connection pooler pid in front of traced
// servers (the PGWire family): its threads are marked as a pooler's, and
// its C library's send (libc, as the pooler maps it) is probed in its
// process alone, so that no other process pays for it. A pooler already
// followed is skipped.
func (t *Tracer) TrackPooler(pid int, libc string) error {
	key, err := attachment(libc, fmt.Sprintf("pooler %d", pid))
	if err != nil || t.binaries[key] {
		return err
	}
	tasks, err := procfs.Tasks(pid)
	if err != nil {
		return nil // gone already
	}
	for _, tid := range tasks {
		if err := t.setTaskLocal(tid, dbiolatTaskLocal{Kind: uint32(Pooler)}); err != nil {
			return fmt.Errorf("following pooler %d's thread %d: %w", pid, tid, err)
		}
	}
	ex, err := link.OpenExecutable(libc)
	if err != nil {
		return fmt.Errorf("opening %s: %w", libc, err)
	}
	prog := t.objs.PgwirePoolerSend
	err = t.attach(prog, false, func() (link.Link, error) {
		if t.uprobeMulti {
			return ex.UprobeMulti([]string{PoolerSend}, prog, &link.UprobeMultiOptions{PID: uint32(pid)})
		}
		return ex.Uprobe(PoolerSend, prog, &link.UprobeOptions{PID: pid})
	})
	if errors.Is(err, link.ErrNoSymbol) {
		return fmt.Errorf("%s has no function %s: %w", libc, PoolerSend, ErrNoFunction)
	}
	if err != nil {
		return fmt.Errorf("attaching to %s in %s for pooler %d: %w", PoolerSend, libc, pid, err)
	}
	t.binaries[key] = true
	return nil
}

// ServerPort tells the kernel side that a traced server listens on a TCP
// port: a pooler's connection to that port is a server connection.
func (t *Tracer) ServerPort(port, instance int) error {
	if port <= 0 || port > 0xffff {
		return nil
	}
	if err := t.objs.ServerPorts.Put(uint16(port), uint32(instance)); err != nil {
		return fmt.Errorf("noting server port %d: %w", port, err)
	}
	return nil
}
