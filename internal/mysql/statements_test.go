package mysql

import "testing"

// A sysbench connection's life as captured (wire_test.go): it prepares
// BEGIN, then its SELECT (the server's reply assigned 3), executes it
// twice, closes it; after the close, an execute of 3 is unknown again.
func TestStatementsSysbench(t *testing.T) {
	var s Statements
	cmd := func(h string) Command {
		c, ok := ParseCommand(unhex(t, h))
		if !ok {
			t.Fatalf("%s is no command", h)
		}
		return c
	}
	reply, _ := ParsePrepareOK(unhex(t, capPrepareOK))
	steps := []struct {
		cmd     string
		replyID uint32
		want    string
	}{
		{capPrepareBegin, 1, "BEGIN"},
		{capPrepare, reply.StmtID, "SELECT c FROM sbtest1 WHERE id=?"},
		{capExecuteTypes, 0, "SELECT c FROM sbtest1 WHERE id=?"},
		{capExecute, 0, "SELECT c FROM sbtest1 WHERE id=?"},
		{capExecuteInsert, 0, "-- statement 11, prepared before the trace began"},
		{capClose, 0, "SELECT c FROM sbtest1 WHERE id=?"},
		{capExecute, 0, "-- statement 3, prepared before the trace began"},
		{capQuerySelect, 0, "SELECT 1+1 AS two"},
		{capPing, 0, ""},
	}
	for i, st := range steps {
		if got := s.Observe(cmd(st.cmd), st.replyID); got != st.want {
			t.Errorf("step %d (%s): %q, want %q", i, cmd(st.cmd).Name, got, st.want)
		}
	}
	if s.Len() != 1 {
		t.Errorf("%d statements left, want BEGIN's alone", s.Len())
	}
	s.Observe(Command{Code: ComResetConnection}, 0)
	if s.Len() != 0 {
		t.Errorf("%d statements left after COM_RESET_CONNECTION", s.Len())
	}
}

// MariaDB's id -1 names the statement prepared last, until a prepare fails.
func TestStatementsLast(t *testing.T) {
	var s Statements
	if got := s.Text(StmtLast); got != "-- the statement prepared last, prepared before the trace began" {
		t.Errorf("before any prepare: %q", got)
	}
	s.Prepared(4, "SELECT 4")
	if got := s.Text(StmtLast); got != "SELECT 4" {
		t.Errorf("after a prepare: %q", got)
	}
	s.Prepared(0, "SELECT nope FROM nowhere") // failed
	if _, ok := s.Lookup(StmtLast); ok {
		t.Error("after a failed prepare, -1 still names a statement")
	}
	if got, _ := s.Lookup(4); got != "SELECT 4" {
		t.Errorf("statement 4 lost to a failed prepare: %q", got)
	}
}

func TestStatementsBounded(t *testing.T) {
	s := NewStatements()
	for id := uint32(1); id <= 3*MaxStatements; id++ {
		s.Prepared(id, "SELECT 1")
		if s.Len() > MaxStatements {
			t.Fatalf("%d statements after %d prepares", s.Len(), id)
		}
	}
	if got, ok := s.Lookup(3 * MaxStatements); !ok || got != "SELECT 1" {
		t.Errorf("the newest statement was evicted")
	}
	s.Prepared(3*MaxStatements, "SELECT 2") // the same id again: replaced, nothing evicted
	if s.Len() != MaxStatements {
		t.Errorf("%d statements, want %d", s.Len(), MaxStatements)
	}
}
