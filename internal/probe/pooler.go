package probe

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/link"

	"github.com/dbiolat/dbiolat/internal/procfs"
)

// Pooler is the kind of a connection pooler's threads in front of
// PostgreSQL (pgbouncer), Router of MySQL Router's: not traced as a
// database's, only followed for which client each request they forward
// to a server comes from (pooler.bpf.h).
const (
	Pooler = ProcKind(dbiolatProcKindPROC_POOLER)
	Router = ProcKind(dbiolatProcKindPROC_ROUTER)
)

// TrackPooler follows the pooler pid of kind (Pooler, Router) in front of
// traced servers: its threads are marked as such, and its C library's
// send function (libc, as the pooler maps it) is probed in its process
// alone, so that no other process pays for it. Calling it again marks the
// threads started since.
func (t *Tracer) TrackPooler(pid int, libc string, kind ProcKind) error {
	tasks, err := procfs.Tasks(pid)
	if err != nil {
		return nil // gone already
	}
	for _, tid := range tasks {
		if err := t.setTaskLocal(tid, dbiolatTaskLocal{Kind: uint32(kind)}); err != nil {
			return fmt.Errorf("following pooler %d's thread %d: %w", pid, tid, err)
		}
	}
	key, err := attachment(libc, fmt.Sprintf("pooler %d", pid))
	if err != nil || t.binaries[key] {
		return err
	}
	ex, err := link.OpenExecutable(libc)
	if err != nil {
		return fmt.Errorf("opening %s: %w", libc, err)
	}
	// The C library function each sends with: pgbouncer's send(int fd,
	// const void *buf, size_t len, int flags), MySQL Router's sendmsg(int
	// fd, const struct msghdr *msg, int flags).
	send, prog := "send", t.objs.PgwirePoolerSend
	if kind == Router {
		send, prog = "sendmsg", t.objs.MysqlRouterSend
	}
	off := entryProbeOffset(libc, send) // a probe per message forwarded: where no single step is needed
	err = t.attach(prog, false, func() (link.Link, error) {
		if t.uprobeMulti {
			return ex.UprobeMulti([]string{send}, prog, &link.UprobeMultiOptions{PID: uint32(pid), Offsets: []uint64{off}})
		}
		return ex.Uprobe(send, prog, &link.UprobeOptions{PID: pid, Offset: off})
	})
	if errors.Is(err, link.ErrNoSymbol) {
		return fmt.Errorf("%s has no function %s: %w", libc, send, ErrNoFunction)
	}
	if err != nil {
		return fmt.Errorf("attaching to %s in %s for pooler %d: %w", send, libc, pid, err)
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
