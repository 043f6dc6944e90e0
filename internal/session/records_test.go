package session

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/postgres"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/sqlnorm"
)

// A wait histogram is kept by version and event, not by server: an
// extension's LWLock tranche takes the name the traced servers of that
// version give it, if they agree, and its id otherwise.
func TestWaitHistName(t *testing.T) {
	pg := func(pid, version int, tranches postgres.Tranches) *traced {
		return &traced{server: &pgServer{Instance: postgres.Instance{PID: pid, Version: version},
			tranches: func() postgres.Tranches { return tranches }}}
	}
	const pgss15, lwlock15 = 0x0100004B, 0x01000008 // 15's first extension tranche; LWLock/WALWrite
	for _, c := range []struct {
		what    string
		servers map[int]*traced
		event   uint32
		version int
		want    string
	}{
		{"one server names it", map[int]*traced{1: pg(1, 15, postgres.Tranches{75: "pg_stat_statements"})},
			pgss15, 15, "LWLock/pg_stat_statements"},
		{"one names it, one has none", map[int]*traced{1: pg(1, 15, postgres.Tranches{75: "pg_stat_statements"}), 2: pg(2, 15, nil)},
			pgss15, 15, "LWLock/pg_stat_statements"},
		{"two agree", map[int]*traced{1: pg(1, 15, postgres.Tranches{75: "pg_stat_statements"}), 2: pg(2, 15, postgres.Tranches{75: "pg_stat_statements"})},
			pgss15, 15, "LWLock/pg_stat_statements"},
		{"two disagree", map[int]*traced{1: pg(1, 15, postgres.Tranches{75: "pg_stat_statements"}), 2: pg(2, 15, postgres.Tranches{75: "other"})},
			pgss15, 15, "LWLock/extension (tranche 75)"},
		{"the server is of another version", map[int]*traced{1: pg(1, 16, postgres.Tranches{75: "pg_stat_statements"})},
			pgss15, 15, "LWLock/extension (tranche 75)"},
		{"built in", map[int]*traced{1: pg(1, 15, postgres.Tranches{75: "pg_stat_statements"})},
			lwlock15, 15, "LWLock/WALWrite"},
		{"no server", nil, pgss15, 15, "LWLock/extension (tranche 75)"},
	} {
		s := &Session{servers: c.servers}
		if got := s.waitHistName(c.version, c.event); got != c.want {
			t.Errorf("%s: %q, want %q", c.what, got, c.want)
		}
	}
}

// An application name as the outputs show it: up to its NUL, valid UTF-8,
// control characters as '?', at most model.ApplicationMax bytes cut on a
// character boundary; the kernel's buffer holds a longer one's first 63.
func TestApplicationName(t *testing.T) {
	long := strings.Repeat("a", 62) + "é" // 64 bytes: the é does not fit
	for _, c := range []struct{ in, want string }{
		{"psql\x00garbage", "psql"},
		{"", ""},
		{"\x00", ""},
		{"line\nbreak\ttab\x7f", "line?break?tab?"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{"pgAdmin 4 - DB:postgres", "pgAdmin 4 - DB:postgres"},
		{long, strings.Repeat("a", 62)},
		{strings.Repeat("x", 100), strings.Repeat("x", model.ApplicationMax)},
	} {
		got := application([]byte(c.in))
		if got != c.want || len(got) > model.ApplicationMax || !utf8.ValidString(got) {
			t.Errorf("application(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var e probe.QueryEvent
	if len(e.Application) != model.ApplicationMax+1 {
		t.Errorf("the kernel sends %d bytes of application name, want model.ApplicationMax and its NUL", len(e.Application))
	}
}

// A statement's trace context comes from its raw text, which its
// normalized text and fingerprint no longer hold: two calls that differ
// only in it share their fingerprint, and --raw-sql changes nothing.
func TestStatementTraceContext(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, raw := range []bool{false, true} {
		s := &Session{cfg: Config{RawSQL: raw}}
		var with, without model.Query
		s.statement(&with, []byte("SELECT * FROM t WHERE a = 1 /*controller='x',traceparent='"+tp+"'*/"), false, sqlnorm.PostgreSQL)
		s.statement(&without, []byte("SELECT * FROM t WHERE a = 2"), false, sqlnorm.PostgreSQL)
		if with.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || with.ParentSpanID != "00f067aa0ba902b7" || without.TraceID != "" {
			t.Errorf("raw %v: trace context %q/%q, and %q without one", raw, with.TraceID, with.ParentSpanID, without.TraceID)
		}
		if with.Fingerprint != without.Fingerprint {
			t.Errorf("raw %v: fingerprints %s and %s differ by the comment", raw, with.Fingerprint, without.Fingerprint)
		}
	}
}
