package probe

import (
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
	// A probe per message forwarded, in the pooler's process alone.
	if err := t.attachFunction(ex, libc, send, prog, entry, pid); err != nil {
		return fmt.Errorf("following pooler %d: %w", pid, err)
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
