package session

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/dbiolat/dbiolat/internal/container"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/procfs"
)

// The seam between a trace and the database engines. An engine is a kind
// of database server and how its servers are found; a server is one of
// them, traced: how its processes and threads are attached and named,
// its waits named, its records read. Each engine is one file
// (postgres.go, mysql.go); the session only loops over engines and holds
// their servers, so that every server is found, followed across restarts
// and described the same way.

// An engine is a kind of database server.
type engine struct {
	// protocol is the family its queries come from under the families
	// chosen (PostgreSQL's is none with --usdt); an error if it cannot be
	// traced with them.
	protocol  func(probe.Families) (probe.Families, error)
	discover  func() ([]server, error) // every server of it running on the host
	byPID     func(pid int) (server, error)
	byDataDir func(dir string) (server, error)
	// waitName names a wait event the kernel recorded for a server of
	// this major version (proc_info.version); false: not one of its.
	waitName func(version int, event uint32) (string, bool)
}

// engines are the engines traced, in the order servers are listed.
var engines = []*engine{&postgresEngine, &mysqlEngine}

// A server is one running database server, as its engine knows it.
type server interface {
	engine() *engine
	// about says what it is; Name and Container are the session's to set.
	about() model.Server
	// attach traces its processes and threads from now on (the session
	// knows it already: their records name it).
	attach(s *Session) error
	// role says what one of its processes or threads does, if that can
	// be told now.
	role(pid uint32) (proc, bool)
	// waitName names a wait event as the server does.
	waitName(event uint32) string
	// query turns a record of its into a model.Query; nil for one sent
	// only to teach what later records need.
	query(s *Session, t *traced, e *probe.QueryEvent, text []byte) *model.Query
	// unit names a unit of its (thread_state.unit) as a process and,
	// where each thread is a unit, a thread of it.
	unit(unit uint32) (pid, tid int)
	// check says what a trace of it will see (doctor), or what it lacks.
	check() []ServerCheck
	// tick is called every second: learning threads' roles, forgetting
	// idle connections.
	tick(s *Session, now time.Time)
}

// waitName names a wait event by the engine it belongs to (a wait
// histogram's: it names no server).
func waitName(version int, event uint32) string {
	var name string
	for _, e := range engines {
		n, ok := e.waitName(version, event)
		if ok {
			return n
		}
		name = cmp.Or(name, n)
	}
	return name
}

// traced is a server the session attached to.
type traced struct {
	server
	started   procfs.Start    // its main process's, to tell it is still the same
	container *container.Info // nil: the host
	gone      bool            // exited, not back yet
}

// describe is the server as records and series name it.
func (t *traced) describe() model.Server {
	m := t.about()
	m.Container = t.container
	m.Name = model.ServerName(m.DataDir, t.container)
	return m
}

// proc is what a traced process or thread is: its role and, for one
// serving a client, whom.
type proc struct {
	role                       model.Role
	database, user, clientAddr string
	clientPort                 int
	// again: read it again when next asked (a PostgreSQL child that
	// still shows its postmaster's title).
	again bool
}

// errNoServer: nothing to trace was found.
var errNoServer = errors.New("no running PostgreSQL, MySQL or MariaDB found: start one, or point at it with --pid or --pgdata")

// servers finds the database servers a trace attaches to: the one a
// process belongs to (pid), the one serving a data directory (dir), or,
// with neither, every server of every engine running on the host.
func servers(pid int, dir string) ([]server, error) {
	if pid == 0 && dir == "" {
		var all []server
		for _, e := range engines {
			found, err := e.discover()
			if err != nil {
				return nil, err
			}
			all = append(all, found...)
		}
		if len(all) == 0 {
			return nil, errNoServer
		}
		return all, nil
	}
	if _, ok := procfs.StartOf(pid); pid != 0 && !ok {
		return nil, fmt.Errorf("no process has PID %d: check the PID (pgrep -a 'postgres|mysqld|mariadbd' lists the database servers)", pid)
	}
	var first error
	for _, e := range engines {
		var sv server
		var err error
		if pid != 0 {
			sv, err = e.byPID(pid)
		} else {
			sv, err = e.byDataDir(dir)
		}
		if err == nil {
			return []server{sv}, nil
		}
		if first == nil {
			first = err
		}
	}
	// A process we can see that is of no engine: say so for all; else the
	// first engine's error says what is wrong (no such process, no permission).
	if _, err := procfs.Exe(pid); pid != 0 && err == nil {
		return nil, fmt.Errorf("process %d (%s) is neither PostgreSQL nor MySQL or MariaDB: give the PID of a postgres, mysqld or mariadbd process, or use --pgdata",
			pid, procfs.Comm(pid))
	}
	return nil, first
}

// ServerCheck is what doctor says of a server a trace would attach to.
type ServerCheck struct {
	Name    string // the check: the server and its binary
	Err     error  // what it lacks
	Info    string // what a trace of it will see
	DataDir string // on a server's last check: the storage under it is checked next
}

// Doctor finds the servers a trace would attach to (servers) and says
// what tracing each will see.
func Doctor(pid int, dir string) ([]ServerCheck, error) {
	found, err := servers(pid, dir)
	var out []ServerCheck
	for _, sv := range found {
		cs := sv.check()
		cs[len(cs)-1].DataDir = sv.about().DataDir // its storage is checked after its last
		out = append(out, cs...)
	}
	return out, err
}
