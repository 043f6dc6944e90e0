package session

import (
	"time"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/postgres"
	"github.com/dbiolat/dbiolat/internal/probe"
)

// Queries counted in the kernel by their statement's identity
// (probe.Emit.Statements: serve, top). The kernel counts; a record names
// each identity once (its first on a CPU, probe.EmitFirst), from which Go
// keeps what the identity's sums are labelled with.

// unnamedWait is how long an identity's counts wait for the record that
// names it (it is read with the counts' first look, normally) before they
// go out as model.UnnamedFingerprint.
const unnamedWait = 5 * time.Second

// Room in the kernel's statement table: once it is three quarters full,
// identities idle for evictIdle are deleted from it (their counts were
// read; one that comes back starts again, named again), as
// pg_stat_statements deallocates its least used. evictIdle is long, so a
// query racing its identity's eviction, which would go uncounted, is
// about impossible.
const evictIdle = 10 * time.Minute

// counted is what the session keeps of the kernel's statement counts.
type counted struct {
	names   map[probe.StmtKey]*model.Query // labels of each identity, from its record (key: Cpu 0)
	prev    map[probe.StmtKey]probe.StmtTotals
	over    probe.StmtTotals // the overflow's, as last read
	unseen  map[probe.StmtKey]time.Time
	changed map[probe.StmtKey]time.Time // when each identity last counted a query
}

// name keeps what a record says of its statement's identity.
func (c *counted) name(e *probe.QueryEvent, q *model.Query) {
	k := e.Stmt
	k.Cpu = 0
	if c.names == nil {
		c.names = map[probe.StmtKey]*model.Query{}
	}
	c.names[k] = &model.Query{Database: q.Database, User: q.User, Application: q.Application,
		Fingerprint: q.Fingerprint, Query: q.Query, Truncated: q.Truncated, QueryID: queryID(k)}
}

// queryID is the server's query id an identity is, 0 if it is a hash of
// ours (a text's, a prepared statement's).
func queryID(k probe.StmtKey) int64 {
	if k.Kind != probe.StmtQueryID {
		return 0
	}
	return int64(k.Queryid) // as pg_stat_statements shows it: signed
}

// Statements returns what the kernel counted of each statement identity
// since the last call: per identity a record of its statements' sums
// (Statements their calls, QueryNs their time, the boxes, file system
// and block figures), labelled as its naming record was, and their
// latencies. An identity not named yet waits for its record (asked of
// the kernel again) up to unnamedWait, then goes as
// model.UnnamedFingerprint; queries the kernel counted together, its
// table full, as model.OtherFingerprint.
func (s *Session) Statements() ([]model.StatementCounts, error) {
	table, err := s.tracer.Statements()
	if err != nil {
		return nil, err
	}
	totals, over := table.Totals, &table.Overflow
	c := &s.counted
	if c.prev == nil {
		c.prev, c.unseen, c.changed = map[probe.StmtKey]probe.StmtTotals{}, map[probe.StmtKey]time.Time{}, map[probe.StmtKey]time.Time{}
	}
	var out []model.StatementCounts
	var ask []uint64
	now := time.Now()
	for k, cur := range totals {
		d := *cur
		prev := c.prev[k]
		d.Sub(&prev)
		if d.Calls == 0 {
			continue
		}
		c.changed[k] = now
		name := c.names[k]
		if name == nil {
			if first, ok := c.unseen[k]; !ok {
				c.unseen[k] = now
			} else if now.Sub(first) >= unnamedWait {
				name = &model.Query{Fingerprint: model.UnnamedFingerprint, QueryID: queryID(k)}
			}
		}
		if name == nil {
			ask = append(ask, k.Queryid)
			continue
		}
		delete(c.unseen, k)
		c.prev[k] = *cur
		out = append(out, s.statementCounts(k.Instance, &d, name))
	}
	d := *over
	d.Sub(&c.over)
	if d.Calls > 0 {
		c.over = *over
		out = append(out, s.statementCounts(0, &d, &model.Query{Fingerprint: model.OtherFingerprint, Application: model.OtherFingerprint}))
	}
	if err := s.tracer.AskStatements(ask); err != nil {
		return nil, err
	}
	return out, s.evict(table, now)
}

// evict deletes the idle identities (counted.idle) from the kernel's
// table, and what is kept of them.
func (s *Session) evict(table *probe.StatementTable, now time.Time) error {
	c := &s.counted
	idle := c.idle(table, now)
	for _, k := range idle {
		delete(c.prev, k)
		delete(c.names, k)
		delete(c.changed, k)
	}
	return s.tracer.EvictStatements(idle)
}

// idle are, in a table three quarters full, the named identities that
// counted no query for evictIdle.
func (c *counted) idle(table *probe.StatementTable, now time.Time) []probe.StmtKey {
	if table.Entries < table.Capacity*3/4 {
		return nil
	}
	var idle []probe.StmtKey
	for k := range table.Totals {
		if now.Sub(c.changed[k]) >= evictIdle && c.unseen[k].IsZero() {
			idle = append(idle, k)
		}
	}
	return idle
}

// statementCounts is a record of the sums d of a server's statements,
// labelled as name, and their latencies.
func (s *Session) statementCounts(instance uint32, d *probe.StmtTotals, name *model.Query) model.StatementCounts {
	e := &probe.QueryEvent{EndNs: d.Ns, Instance: instance, Statements: uint32(d.Calls)}
	e.Acct.Fs, e.Acct.Blk, e.Acct.BoxNs = d.Fs, d.Blk, d.BoxNs
	e.Acct.BlkBusyNs, e.Acct.BlkQueueNs, e.Acct.BlkDeviceNs = d.BlkBusyNs, d.BlkQueueNs, d.BlkDeviceNs
	t := s.tracedOf(instance)
	q := s.accounted(t, e)
	q.TS = time.Now()
	q.Database, q.User, q.Application = name.Database, name.User, name.Application
	q.Fingerprint, q.Query, q.Truncated, q.QueryID = name.Fingerprint, name.Query, name.Truncated, name.QueryID
	q.Counted = true
	// Only a client backend (a MySQL connection's thread) ends a statement
	// the kernel counts, from its client's messages: the role top's filter
	// selects its rows by.
	q.Role = string(postgres.ClientBackend)
	if _, ok := t.server.(*mysqlServer); ok {
		q.Role = string(mysqlConnRole)
	}
	h := &hist.Hist{Sum: d.Ns}
	for i, n := range d.Slots {
		h.AddSlot(probe.StmtSlot(i), n)
	}
	return model.StatementCounts{Sums: q, Latencies: h}
}
