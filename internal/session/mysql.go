package session

import (
	"debug/elf"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbiolat/dbiolat/internal/elfvar"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/mysql"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/procfs"
	"github.com/dbiolat/dbiolat/internal/sqlnorm"
)

// MySQL and MariaDB: one process whose threads each have a role (told
// from their stacks, internal/mysql); queries from MySQL's protocol
// (probe.MySQLWire), per connection; waits bracketed by thd_wait_begin.

var mysqlEngine = engine{
	protocol: func(f probe.Families) (probe.Families, error) {
		if f&(probe.USDT|probe.Buffers) != 0 {
			return 0, errors.New("MySQL and MariaDB have no USDT probes: leave out --usdt and --buffers for them (point at a PostgreSQL with --pid or --pgdata)")
		}
		return probe.MySQLWire, nil
	},
	discover: func() ([]server, error) {
		ins, err := mysql.Discover()
		out := make([]server, len(ins))
		for i, in := range ins {
			out[i] = newMySQLServer(in)
		}
		return out, err
	},
	byPID:     func(pid int) (server, error) { return mysqlServerOf(mysql.ByPID(pid)) },
	byDataDir: func(dir string) (server, error) { return mysqlServerOf(mysql.ByDataDir(dir)) },
	waitName: func(_ int, event uint32) (string, bool) {
		return mysql.WaitName(byte(event)), event&0xff000000 == probe.WaitClassMySQL
	},
}

// The roles of a MySQL server's process (and main thread) and of the
// threads running its queries; its other threads' are mysql.ThreadRole's.
const (
	mysqlServerRole model.Role = mysql.RoleServer
	mysqlConnRole   model.Role = mysql.RoleConnection
)

// mysqlServer is a MySQL or MariaDB server traced.
type mysqlServer struct {
	mysql.Instance
	threads *mysql.Threads        // tells its threads' roles; nil: they cannot be told
	conns   map[uint64]*mysqlConn // its connections by the kernel's key for them
}

// mysqlConn is what a connection's records taught: who connected to
// which database from which application, and the statements it prepared.
type mysqlConn struct {
	user, database string
	application    string // its handshake's program_name attribute
	routedFor      string // the client MySQL Router says it is for ("addr:port"); "": none said
	statements     mysql.Statements
	last           time.Time // its last record (tick forgets idle ones)
}

func newMySQLServer(in mysql.Instance) *mysqlServer {
	return &mysqlServer{Instance: in, conns: map[uint64]*mysqlConn{}}
}

func mysqlServerOf(in mysql.Instance, err error) (server, error) {
	if err != nil {
		return nil, err
	}
	return newMySQLServer(in), nil
}

func (m *mysqlServer) engine() *engine { return &mysqlEngine }

func (m *mysqlServer) about() model.Server {
	return model.Server{Kind: m.Flavor, Version: m.Version, PID: m.PID, DataDir: m.DataDir, Port: m.Port}
}

func (m *mysqlServer) waitName(event uint32) string { return mysql.WaitName(byte(event)) }

// unit: each thread of the server is a unit of its own, with its role.
func (m *mysqlServer) unit(unit uint32) (pid, tid int) {
	if int(unit) == m.PID {
		return m.PID, 0
	}
	return m.PID, int(unit)
}

// attach traces the server: any of its threads may run a connection's
// commands; the waits it brackets are named and boxed; the reads InnoDB's
// I/O threads perform for a query are charged to it; its TLS
// connections are read in plaintext at the OpenSSL it maps; each
// thread's I/O is kept apart, under its role; its port is noted, so that
// MySQL Router's connections to it are known as such.
func (m *mysqlServer) attach(s *Session) error {
	s.procs[uint32(m.PID)] = proc{role: mysqlServerRole}
	var err error
	if waits, ok := waitFunctions(m.Binary); !ok {
		s.warn(fmt.Sprintf("%s: its waits cannot be named (%s exports no thd_wait_begin): lock waits count as other waits", m, m.Binary))
	} else if err = s.tracer.AttachWaits(m.Binary, waits); err != nil {
		s.warn(fmt.Sprintf("%s: its waits cannot be named (%v): lock waits count as other waits", m, err))
	}
	if exports(m.Binary, mysql.InnoDBQueueRead, mysql.InnoDBPerformRead) {
		err = s.tracer.AttachAIO(m.Binary, probe.AIOFunctions{Stage: mysql.InnoDBQueueRead, Perform: mysql.InnoDBPerformRead, InnoDB: true})
		if err != nil {
			s.warn(fmt.Sprintf("%s: the reads its I/O threads perform for a query cannot be charged to it (%v)", m, err))
		}
	}
	if m.threads, err = mysql.NewThreads(m.Instance); err != nil {
		s.warn(fmt.Sprintf("%s: its threads' roles cannot be told (%v): their I/O is the server's", m, err))
	}
	info := probe.ProcInfo{Instance: m.PID, Kind: probe.MySQL, Version: m.Major}
	info.TLSProbed = s.attachOpenSSL(m.PID, m.String(), probe.MySQLWire) // MySQL's protocol programs read the plaintext
	if err = s.tracer.Track(m.PID, info, false); err != nil {
		return err
	}
	m.learnThreads(s)
	return s.tracer.ServerPort(m.Port, m.PID) // MySQL Router's TCP connections to it: pooler.go
}

// role: a thread's name tells it (MySQL), or its stack while it waits (MariaDB).
func (m *mysqlServer) role(tid uint32) (proc, bool) {
	if m.threads == nil {
		return proc{}, false
	}
	role, ok := m.threads.ThreadRole(int(tid))
	return proc{role: model.Role(role)}, ok
}

// tick learns the roles of new threads and forgets idle connections.
func (m *mysqlServer) tick(s *Session, now time.Time) {
	m.learnThreads(s)
	// A connection that ends without COM_QUIT (its client was killed) is
	// not seen to end: one silent for an hour is forgotten, so that
	// churn does not grow the map.
	for key, c := range m.conns {
		if now.Sub(c.last) > time.Hour {
			delete(m.conns, key)
		}
	}
}

// learnThreads tells the roles of the server's threads not known yet: a
// thread's stack is read while it waits, and a short-lived thread is
// gone by the time its record is read.
func (m *mysqlServer) learnThreads(s *Session) {
	if m.threads == nil {
		return
	}
	tids, _ := procfs.Tasks(m.PID)
	for _, tid := range tids {
		if p, known := s.procs[uint32(tid)]; known && p.role != model.RoleUnknown {
			continue
		}
		if role, ok := m.threads.ThreadRole(tid); ok {
			s.procs[uint32(tid)] = proc{role: model.Role(role)}
		}
	}
}

// conn is the state of a connection (the kernel's connection key).
func (m *mysqlServer) conn(key uint64) *mysqlConn {
	c := m.conns[key]
	if c == nil {
		c = &mysqlConn{statements: mysql.NewStatements()}
		m.conns[key] = c
	}
	c.last = time.Now()
	return c
}

// query reads the command out of a record, with the statement texts and
// the user each connection's earlier records taught; nil for a record
// that only teaches (a handshake, a COM_STMT_PREPARE, a COM_INIT_DB).
func (m *mysqlServer) query(s *Session, t *traced, e *probe.QueryEvent, text []byte) *model.Query {
	c := m.conn(e.Conn)
	truncated := e.TextTruncated != 0
	cmd, ok := mysql.ParseCommand(text)
	switch {
	case !ok:
		return nil
	case cmd.Code == mysql.ComSleep: // the connection's handshake response
		if h, ok := mysql.ParseHandshakeResponse(text[1:]); ok {
			identified(c, h.User, h.Database, h.Attributes)
		}
		return nil
	case cmd.Code == mysql.ComQuit:
		delete(m.conns, e.Conn)
		return nil
	case cmd.Code == mysql.ComInitDB:
		c.database = cmd.Text
	case cmd.Code == mysql.ComChangeUser:
		if cu, ok := mysql.ParseChangeUser(text); ok {
			identified(c, cu.User, cu.Database, cu.Attributes)
		}
	}
	stmt := c.statements.Observe(cmd, e.ReplyId)
	if cmd.Code == mysql.ComStmtExecute { // the text is the prepare's, whole
		truncated = false
	}
	if !readWhole(e) {
		return nil
	}
	q := s.accounted(t, e)
	q.Role, q.Database, q.User, q.Application = string(mysqlConnRole), c.database, c.user, c.application
	s.pooled(q, &e.Pooled)
	if q.Via != "" {
		q.Application = routedApplication(c, q)
	}
	q.TID = int(e.Pid)
	s.procs[e.Pid] = proc{role: mysqlConnRole} // a thread pool's worker is known by its work
	if e.Conn <= 0xffffffff {                  // else the socket's address: a connection older than the trace
		q.ConnectionID = uint32(e.Conn)
	}
	s.statement(q, []byte(stmt), truncated, sqlnorm.MySQL)
	return q
}

// identified: connection c logged in (its handshake) or switched (a
// COM_CHANGE_USER) to user and database, with attributes: its
// application, and the client MySQL Router says it is for, if any. A
// COM_CHANGE_USER without attributes leaves them as they were.
func identified(c *mysqlConn, user, database string, attributes map[string]string) {
	c.user, c.database = user, database
	if attributes == nil {
		return
	}
	c.application = application([]byte(attributes[mysql.ProgramName]))
	c.routedFor = ""
	if ip, port := attributes[mysql.RoutedClientIP], attributes[mysql.RoutedClientPort]; ip != "" && port != "" {
		c.routedFor = net.JoinHostPort(ip, port)
	}
}

// routedApplication is the application of a query of connection c that
// MySQL Router forwarded for the client q names. Passing TLS through, the
// Router gives each client a connection of its own, whose handshake is
// the client's. Ending TLS, it says whom a connection is for: the client's
// attributes, its address added, in the handshake of a connection it
// opens, and in the COM_CHANGE_USER that hands a shared one to the next
// client. A query of another client than the one it said (its switch not
// seen) has no application known, rather than another's.
func routedApplication(c *mysqlConn, q *model.Query) string {
	if c.routedFor == "" || c.routedFor == net.JoinHostPort(q.ClientAddr, strconv.Itoa(q.ClientPort)) {
		return c.application
	}
	return ""
}

// check says what a trace of the server will see, by what its binary and
// libraries export and what its threads' names and stacks tell.
func (m *mysqlServer) check() []ServerCheck {
	in := m.Instance
	exe, _ := os.Readlink(in.Binary)
	c := ServerCheck{Name: fmt.Sprintf("%s server pid %d (data %s, binary %s)", in.Flavor, in.PID, in.DataDir, exe)}
	var says []string
	says = append(says, "queries from MySQL's client protocol, prepared statements too")
	if _, ok := waitFunctions(in.Binary); ok {
		says = append(says, "waits named by thd_wait_begin (row, metadata, table locks: lock; disk I/O: I/O wait)")
	} else {
		says = append(says, "no thd_wait_begin: lock waits count as other waits")
	}
	if exports(in.Binary, mysql.InnoDBQueueRead, mysql.InnoDBPerformRead) {
		says = append(says, "reads InnoDB's I/O threads perform for a query charged to it")
	}
	if lib, _ := elfvar.Library(in.PID, probe.OpenSSL.Library); lib != "" && exports(lib, probe.OpenSSL.Read, probe.OpenSSL.Write) {
		says = append(says, "TLS connections read at "+lib)
	} else {
		says = append(says, "no OpenSSL to probe: TLS connections are counted, not traced")
	}
	roles := map[string]int{}
	if t, err := mysql.NewThreads(in); err == nil {
		tids, _ := procfs.Tasks(in.PID)
		for _, tid := range tids {
			if role, ok := t.ThreadRole(tid); ok {
				roles[role]++
			}
		}
	}
	if len(roles) == 0 {
		says = append(says, "its threads' roles cannot be told: their I/O shows as the server's")
	} else {
		var rs []string
		for _, r := range slices.Sorted(maps.Keys(roles)) {
			rs = append(rs, fmt.Sprintf("%s %d", r, roles[r]))
		}
		says = append(says, "threads by role: "+strings.Join(rs, ", "))
	}
	c.Info = strings.Join(says, "; ")
	return []ServerCheck{c}
}

// waitFunctions: the wait brackets the server's binary exports, if any.
func waitFunctions(binary string) (probe.WaitFunctions, bool) {
	for _, w := range mysql.WaitSymbols {
		if exports(binary, w[0], w[1]) {
			return probe.WaitFunctions{Begin: w[0], End: w[1]}, true
		}
	}
	return probe.WaitFunctions{}, false
}

// exports says the ELF file defines every function named.
func exports(file string, names ...string) bool {
	f, err := elf.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	syms, _ := f.DynamicSymbols()
	for _, name := range names {
		if !slices.ContainsFunc(syms, func(s elf.Symbol) bool { return s.Name == name && s.Value != 0 }) {
			return false
		}
	}
	return true
}
