package session

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/dbiolat/dbiolat/internal/elfvar"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/procfs"
)

// Behind a connection pooler (pgbouncer) a backend's client is the
// pooler, and in transaction pooling one backend serves many clients in
// turn. The kernel side follows the pooler's sockets and gives each round
// trip the client connection the pooler forwarded it for (pooler.bpf.h);
// here the poolers are found, and a query record names its client.

// poolerExe is the program followed as a pooler: PgBouncer's.
const poolerExe = "pgbouncer"

// AF_INET, AF_INET6 and AF_UNIX, as the kernel's client_end names its family.
const (
	afUnix  = 1
	afInet  = 2
	afInet6 = 10
)

// followPoolers follows the poolers running, with the client protocol
// traced on a PostgreSQL server: a pooler in front of no traced server
// costs a probe on its sends and changes nothing.
func (s *Session) followPoolers() {
	if s.cfg.Families&probe.PGWire == 0 || !s.tracesPostgres() {
		return
	}
	pids, err := procfs.PIDs()
	if err != nil {
		return
	}
	for _, pid := range pids {
		if procfs.ExeName(pid) != poolerExe {
			continue
		}
		started, ok := procfs.StartOf(pid)
		if seen, known := s.poolers[pid]; !ok || (known && seen == started) {
			continue
		}
		s.poolers[pid] = started
		if err := s.trackPooler(pid); err != nil {
			s.warn(fmt.Sprintf("%s pid %d: the clients it forwards queries for cannot be told (%v): its queries name it as their client", poolerExe, pid, err))
		}
	}
}

// trackPooler follows one pooler, through the C library it maps.
func (s *Session) trackPooler(pid int) error {
	libc, err := elfvar.Library(pid, "libc.so")
	if err != nil {
		return err
	}
	if libc == "" {
		return errors.New("it maps no C library")
	}
	return s.tracer.TrackPooler(pid, libc)
}

// tracesPostgres says a PostgreSQL server is traced now.
func (s *Session) tracesPostgres() bool {
	for _, t := range s.current {
		if t.engine() == &postgresEngine && !t.gone {
			return true
		}
	}
	return false
}

// pooled names a query's client behind a pooler: the pooler it came
// through (Via), and the client connection the pooler forwarded it for,
// rather than the pooler's own connection to the server. A client the
// kernel could not tell is left out, not taken for the pooler.
func pooled(q *model.Query, p *probe.PooledFor) {
	if p.Pooler == 0 {
		return
	}
	q.Via = poolerExe + " pid " + strconv.Itoa(int(p.Pooler))
	q.ClientAddr, q.ClientPort, q.ClientPID = "", 0, 0
	switch p.Client.Family {
	case afInet, afInet6:
		q.ClientAddr, q.ClientPort = net.IP(p.Client.Addr[:]).String(), int(p.Client.Port)
	case afUnix:
		q.ClientPID = int(p.Client.Pid)
	}
}
