package mysql

import "fmt"

// MaxStatements bounds the statements remembered per connection: a client
// that prepares without ever closing (a leak, or a pool that never
// reconnects) must not grow dbiolat with it.
const MaxStatements = 1000

// Statements is one connection's prepared statements, by the id the
// server gave each: a COM_STMT_EXECUTE names only the id, its text was in
// the COM_STMT_PREPARE and the id in the server's reply to it, so both
// must be seen and joined here. The zero value is ready to use; it is not
// safe for concurrent use.
type Statements struct {
	texts map[uint32]string
	last  uint32 // the id of the statement prepared last, for MariaDB's StmtLast; 0 none
}

// NewStatements returns an empty table (as the zero value is).
func NewStatements() Statements { return Statements{texts: map[uint32]string{}} }

// Prepared remembers the text a COM_STMT_PREPARE sent under the id the
// server's reply assigned. Id 0 is none (servers count from 1): the
// prepare failed, nothing is learned, and MariaDB's StmtLast names no
// statement until the next prepare. At MaxStatements an arbitrary
// statement is forgotten first.
func (s *Statements) Prepared(id uint32, text string) {
	if id == 0 || id == StmtLast {
		s.last = 0
		return
	}
	if s.texts == nil {
		s.texts = map[uint32]string{}
	}
	if _, ok := s.texts[id]; !ok && len(s.texts) >= MaxStatements {
		for k := range s.texts {
			delete(s.texts, k)
			break
		}
	}
	s.texts[id] = text
	s.last = id
}

// Closed forgets a statement (COM_STMT_CLOSE).
func (s *Statements) Closed(id uint32) {
	if id == StmtLast {
		id = s.last
	}
	delete(s.texts, id)
	if id == s.last {
		s.last = 0
	}
}

// Reset forgets them all: the server closes a connection's statements at
// COM_RESET_CONNECTION and COM_CHANGE_USER.
func (s *Statements) Reset() {
	clear(s.texts)
	s.last = 0
}

// Len is how many statements are remembered.
func (s *Statements) Len() int { return len(s.texts) }

// Lookup returns a statement's text, if it was seen prepared.
func (s *Statements) Lookup(id uint32) (string, bool) {
	if id == StmtLast {
		id = s.last
	}
	t, ok := s.texts[id]
	return t, ok
}

// Text is the text of the statement an id names, or, for one prepared
// before dbiolat saw it, an SQL comment that says so (worded like
// internal/postgres's, so that both read alike and normalize to
// themselves).
func (s *Statements) Text(id uint32) string {
	if t, ok := s.Lookup(id); ok {
		return t
	}
	if id == StmtLast {
		return "-- the statement prepared last, prepared before the trace began"
	}
	return fmt.Sprintf("-- statement %d, prepared before the trace began", id)
}

// Observe keeps the table in step with a command the connection sent, and
// returns the statement the command runs: its own text for COM_QUERY and
// COM_STMT_PREPARE, the prepared one (Text) for the commands that name a
// statement, "" for the others. replyID is the statement id the server's
// reply to a COM_STMT_PREPARE assigned (0: it failed); other commands
// ignore it.
func (s *Statements) Observe(c Command, replyID uint32) string {
	var text string
	switch c.Code {
	case ComQuery, ComStmtPrepare:
		text = c.Text
	case ComStmtExecute, ComStmtFetch, ComStmtReset, ComStmtSendLongData, ComStmtBulkExecute, ComStmtClose:
		text = s.Text(c.StmtID)
	}
	switch c.Code {
	case ComStmtPrepare:
		s.Prepared(replyID, c.Text)
	case ComStmtClose:
		s.Closed(c.StmtID)
	case ComResetConnection, ComChangeUser:
		s.Reset()
	}
	return text
}
