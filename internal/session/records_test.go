package session

import (
	"testing"

	"github.com/dbiolat/dbiolat/internal/postgres"
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
