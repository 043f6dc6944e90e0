package session

import (
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/postgres"
	"github.com/dbiolat/dbiolat/internal/probe"
)

// What the kernel keeps per PostgreSQL backend, read as deltas: top's
// backend rows when the kernel counts queries by statement identity
// (probe.Emit.Statements) and so sends no record per query. The
// statement counts have no backend; the kernel's per-unit figures do:
// the queries each thread began (their sequence number), the time and
// boxes of those it ended, its file system calls and its block requests.

// unitCounts is one reading of a unit's cumulative figures.
type unitCounts struct {
	probe.UnitQueries
	fs, blk uint64
}

// Backends returns what each PostgreSQL backend did since the last call
// (or since the trace began): those that began queries, and client
// backends that did I/O (a long query that began earlier). A backend that
// exited since takes its last figures with it.
func (s *Session) Backends() ([]model.BackendCounts, error) {
	queries, err := s.tracer.Queries()
	if err != nil {
		return nil, err
	}
	fs, err := s.tracer.ProcTotals()
	if err != nil {
		return nil, err
	}
	blk, err := s.tracer.BlkTotals()
	if err != nil {
		return nil, err
	}
	cur := map[uint32]unitCounts{}
	for unit, q := range queries {
		cur[unit] = unitCounts{UnitQueries: q}
	}
	for unit, p := range fs {
		c := cur[unit]
		c.fs = p.Fs[probe.FSRead].Count + p.Fs[probe.FSWrite].Count + p.Fs[probe.FSSync].Count
		cur[unit] = c
	}
	for k, v := range blk {
		if k.Owner == probe.OwnerTraced {
			c := cur[k.Unit]
			c.blk += v.Io.Count
			cur[k.Unit] = c
		}
	}
	var out []model.BackendCounts
	for unit, c := range cur {
		t := s.servers[s.owner(unit)]
		if t == nil {
			continue
		}
		if _, ok := t.server.(*pgServer); !ok { // a MySQL server's units are threads, not connections: its records say
			continue
		}
		d := delta(c, s.unitsRead[unit])
		p := s.describe(unit)
		if d.Begun == 0 && (d.fs+d.blk == 0 || p.role != model.Role(postgres.ClientBackend)) {
			continue
		}
		role := p.role
		if d.Begun > 0 && (role == model.RoleUnknown || role == model.Role(postgres.Postmaster)) {
			// Its title was not read (gone already, or still the
			// postmaster's), but it began queries from a client's messages.
			role = model.Role(postgres.ClientBackend)
		}
		e := &probe.QueryEvent{EndNs: d.Ns, Tgid: unit}
		e.Acct.BoxNs = d.BoxNs
		out = append(out, model.BackendCounts{PID: int(unit), Role: string(role), Database: p.database, User: p.user,
			Queries: d.Begun, Time: s.accounted(t, e), FSCount: d.fs, BlkCount: d.blk})
	}
	s.unitsRead = cur // units gone are forgotten with it
	return out, nil
}

// delta is what a unit did between two readings. A count that went down
// is a unit read anew (its pid reused, its exited threads' totals folded
// away): all of it counts.
func delta(cur, prev unitCounts) unitCounts {
	d := func(c, p uint64) uint64 {
		if c < p {
			return c
		}
		return c - p
	}
	out := unitCounts{fs: d(cur.fs, prev.fs), blk: d(cur.blk, prev.blk)}
	out.Begun, out.Ns = d(cur.Begun, prev.Begun), d(cur.Ns, prev.Ns)
	for i := range out.BoxNs {
		out.BoxNs[i] = d(cur.BoxNs[i], prev.BoxNs[i])
	}
	return out
}
