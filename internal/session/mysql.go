package session

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/mysql"
	"github.com/dbiolat/dbiolat/internal/postgres"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/sqlnorm"
)

// MySQL and MariaDB servers: traced with the same families as PostgreSQL,
// their queries taken from MySQL's protocol (probe.MySQLWire), their
// records read with internal/mysql.

// The roles of a MySQL server's process (and main thread) and of the
// threads running its queries; its other threads' are mysql.ThreadRole's.
const (
	MySQLServerRole postgres.Role = mysql.RoleServer
	MySQLConnRole   postgres.Role = mysql.RoleConnection
)

// myConn is what a MySQL connection's records taught: who connected to
// which database, and the statements it prepared.
type myConn struct {
	user, database string
	statements     mysql.Statements
	last           time.Time // its last record (forgetConns)
}

// attachMySQL traces a MySQL server: any of its threads may run a
// connection's commands; the waits it brackets are named and boxed; its
// TLS connections are read in plaintext at the OpenSSL it maps; each
// thread's I/O is kept apart, under its role.
func (s *Session) attachMySQL(in mysql.Instance) error {
	s.mysqls[in.PID] = in
	s.learnContainer(in.PID)
	s.procs[uint32(in.PID)] = postgres.Process{Role: MySQLServerRole}
	err := s.tracer.AttachWaits(in.Binary, probe.WaitFunctions{Begin: mysql.WaitBegin, End: mysql.WaitEnd})
	if err != nil {
		s.warn(fmt.Sprintf("%s: its waits cannot be named (%v): lock waits count as other waits", in, err))
	}
	if t, err := mysql.NewThreads(in); err == nil {
		s.myThreads[in.PID] = t
	} else {
		s.warn(fmt.Sprintf("%s: its threads' roles cannot be told (%v): their I/O is the server's", in, err))
	}
	info := probe.ProcInfo{Instance: in.PID, Kind: probe.MySQL, Version: in.Major}
	if s.cfg.Families&probe.MySQLWire != 0 { // MySQL's protocol programs read the plaintext
		info.TLSProbed = s.attachOpenSSL(in.PID, in.String(), s.tracer.AttachMySQLTLS)
	}
	err = s.tracer.Track(in.PID, info, false)
	s.learnThreads()
	return err
}

// learnThreads tells the roles of the servers' threads not known yet: a
// thread's stack is read while it waits, and a short-lived thread is
// gone by the time its record is read. Poll calls it every second.
func (s *Session) learnThreads() {
	for pid, t := range s.myThreads {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			continue
		}
		for _, task := range tasks {
			tid, err := strconv.ParseUint(task.Name(), 10, 32)
			if p, known := s.procs[uint32(tid)]; err != nil || (known && p.Role != postgres.Unknown && p.Role != postgres.Postmaster) {
				continue // Postmaster: what describe says of a command line that is not a PostgreSQL title
			}
			if role, ok := t.ThreadRole(int(tid)); ok {
				s.procs[uint32(tid)] = postgres.Process{Role: postgres.Role(role)}
			}
		}
	}
}

// mysqlThread is the role of a MySQL server's thread, if tid is one and
// its role can be told now.
func (s *Session) mysqlThread(tid uint32) (postgres.Process, bool) {
	for _, t := range s.myThreads {
		if role, ok := t.ThreadRole(int(tid)); ok {
			return postgres.Process{Role: postgres.Role(role)}, true
		}
	}
	return postgres.Process{}, false
}

// conn is the state of a connection (the kernel's connection key).
func (s *Session) conn(key uint64) *myConn {
	c := s.myConns[key]
	if c == nil {
		c = &myConn{statements: mysql.NewStatements()}
		s.myConns[key] = c
	}
	c.last = time.Now()
	return c
}

// mysqlQuery turns a MySQL record into a model.Query; nil for a record
// that only teaches (a handshake, a COM_STMT_PREPARE, a COM_INIT_DB).
func (s *Session) mysqlQuery(e *probe.QueryEvent, text []byte) *model.Query {
	c := s.conn(e.Conn)
	truncated := e.TextTruncated != 0
	cmd, ok := mysql.ParseCommand(text)
	switch {
	case !ok:
		return nil
	case cmd.Code == mysql.ComSleep: // the connection's handshake response
		if h, ok := mysql.ParseHandshakeResponse(text[1:]); ok {
			c.user, c.database = h.User, h.Database
		}
		return nil
	case cmd.Code == mysql.ComQuit:
		delete(s.myConns, e.Conn)
		return nil
	case cmd.Code == mysql.ComInitDB:
		c.database = cmd.Text
	case cmd.Code == mysql.ComChangeUser:
		if u, db, ok := mysql.ParseChangeUser(text); ok {
			c.user, c.database = u, db
		}
	}
	stmt := c.statements.Observe(cmd, e.ReplyId)
	if cmd.Code == mysql.ComStmtExecute { // the text is the prepare's, whole
		truncated = false
	}
	if e.EmitFlags&uint8(probe.EmitWanted) == 0 {
		return nil
	}
	in := s.mysqls[int(e.Instance)]
	q := s.accounted(e)
	q.DataDir, q.Port = in.DataDir, in.Port
	q.Role, q.Database, q.User = string(MySQLConnRole), c.database, c.user
	q.TID = int(e.Pid)
	s.procs[e.Pid] = postgres.Process{Role: MySQLConnRole} // a thread pool's worker is known by its work
	if e.Conn <= 0xffffffff {                              // else the socket's address: a connection older than the trace
		q.ConnectionID = uint32(e.Conn)
	}
	s.statement(q, []byte(stmt), truncated, sqlnorm.MySQL)
	return q
}

// forgetConns drops connections that sent nothing for an hour: one that
// ends without COM_QUIT (its client was killed) is not seen to end, and
// churn must not grow the map.
func (s *Session) forgetConns(now time.Time) {
	for key, c := range s.myConns {
		if now.Sub(c.last) > time.Hour {
			delete(s.myConns, key)
		}
	}
}

// mysqlInstances finds the MySQL servers a trace attaches to, as
// Instances finds PostgreSQL's.
func mysqlInstances(pid int, dir string) ([]mysql.Instance, error) {
	switch {
	case pid != 0:
		in, err := mysql.ByPID(pid)
		return []mysql.Instance{in}, err
	case dir != "":
		in, err := mysql.ByDataDir(dir)
		return []mysql.Instance{in}, err
	}
	return mysql.Discover()
}
