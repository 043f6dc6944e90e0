package session

import (
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/probe"
)

// Room is made only in a table three quarters full, of identities idle
// for evictIdle and named: a busy one, a recent one and one still
// waiting for its name stay.
func TestIdleIdentities(t *testing.T) {
	now := time.Now()
	idle, busy, waiting := probe.StmtKey{Queryid: 1}, probe.StmtKey{Queryid: 2}, probe.StmtKey{Queryid: 3}
	c := &counted{
		changed: map[probe.StmtKey]time.Time{idle: now.Add(-evictIdle - time.Second), busy: now.Add(-time.Second)},
		unseen:  map[probe.StmtKey]time.Time{waiting: now.Add(-time.Hour)},
	}
	totals := map[probe.StmtKey]*probe.StmtTotals{idle: {}, busy: {}, waiting: {}}
	if got := c.idle(&probe.StatementTable{Totals: totals, Entries: 3, Capacity: 100}, now); len(got) != 0 {
		t.Errorf("a table 3%% full: %v evicted, want none", got)
	}
	got := c.idle(&probe.StatementTable{Totals: totals, Entries: 80, Capacity: 100}, now)
	if len(got) != 1 || got[0] != idle {
		t.Errorf("a table 80%% full: %v evicted, want only the idle one %v", got, idle)
	}
}
