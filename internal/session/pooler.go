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

// Behind a connection pooler (pgbouncer) or a proxy (MySQL Router) a
// server connection's client is the pooler, and in pgbouncer's transaction
// pooling or the Router's connection sharing one server connection serves
// many clients in turn. The kernel side follows the pooler's sockets and
// gives each round trip the client connection the pooler forwarded it for
// (pooler.bpf.h); here the poolers are found, and a query record names its
// client.

// poolers are the programs followed as poolers: each in front of one
// engine's servers, whose protocol family reads its sockets.
var poolers = []struct {
	exe    string
	kind   probe.ProcKind
	engine *engine
	family probe.Families
}{
	{"pgbouncer", probe.Pooler, &postgresEngine, probe.PGWire},
	{"mysqlrouter", probe.Router, &mysqlEngine, probe.MySQLWire},
}

// followedPooler is a pooler followed: its program, its process's start,
// and the C library it sends with ("": none found).
type followedPooler struct {
	exe     string
	started procfs.Start
	libc    string
}

// AF_INET, AF_INET6 and AF_UNIX, as the kernel's client_end names its family.
const (
	afUnix  = 1
	afInet  = 2
	afInet6 = 10
)

// followPoolers follows the poolers running in front of an engine traced
// now, its protocol traced: a pooler in front of no traced server costs a
// probe on its sends and changes nothing. One followed already has the
// threads it started since marked.
func (s *Session) followPoolers() {
	var programs map[int]string
	for _, p := range poolers {
		if fam, err := p.engine.protocol(s.cfg.Families); err != nil || fam&p.family == 0 || !s.traces(p.engine) {
			continue
		}
		if programs == nil {
			var err error
			if programs, err = procfs.Programs(); err != nil {
				return
			}
		}
		for pid, name := range programs {
			if name != p.exe {
				continue
			}
			started, ok := procfs.StartOf(pid)
			if !ok {
				continue
			}
			seen, known := s.poolers[pid]
			var err error
			if !known || seen.started != started { // new, or its pid taken by another
				seen, known = followedPooler{exe: p.exe, started: started}, false
				seen.libc, err = cLibrary(pid)
				s.poolers[pid] = seen
			}
			if err == nil && seen.libc != "" { // marks the threads it started since
				err = s.tracer.TrackPooler(pid, seen.libc, p.kind)
			}
			if err != nil && !known {
				s.warn(fmt.Sprintf("%s pid %d: the clients it forwards queries for cannot be told (%v): its queries name it as their client", p.exe, pid, err))
			}
		}
	}
}

// cLibrary is the C library a pooler maps, whose send function is probed.
func cLibrary(pid int) (string, error) {
	libc, err := elfvar.Library(pid, "libc.so")
	if err != nil {
		return "", err
	}
	if libc == "" {
		return "", errors.New("it maps no C library")
	}
	return libc, nil
}

// traces says a server of engine e is traced now.
func (s *Session) traces(e *engine) bool {
	for _, t := range s.current {
		if t.engine() == e && !t.gone {
			return true
		}
	}
	return false
}

// pooled names a query's client behind a pooler: the pooler it came
// through (Via), and the client connection the pooler forwarded it for,
// rather than the pooler's own connection to the server. A client the
// kernel could not tell is left out, not taken for the pooler.
func (s *Session) pooled(q *model.Query, p *probe.PooledFor) {
	if p.Pooler == 0 {
		return
	}
	exe := s.poolers[int(p.Pooler)].exe
	if exe == "" {
		exe = "pooler"
	}
	q.Via = exe + " pid " + strconv.Itoa(int(p.Pooler))
	q.ClientAddr, q.ClientPort, q.ClientPID = "", 0, 0
	switch p.Client.Family {
	case afInet, afInet6:
		q.ClientAddr, q.ClientPort = net.IP(p.Client.Addr[:]).String(), int(p.Client.Port)
	case afUnix:
		q.ClientPID = int(p.Client.Pid)
	}
}
