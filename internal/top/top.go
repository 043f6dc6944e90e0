// Package top is dbiolat top's logic, without a terminal and without BPF:
// an aggregator fed the session's query records, the kernel's counts by
// statement and by backend, and intervals, which makes one Snapshot per
// interval (what each query fingerprint and each backend spent in it, and
// the I/O rates); a View of a snapshot (filtered, sorted, a fingerprint
// selected) as a Frame, which --json prints; and the rendering of a frame
// into lines of text for a width and height, which the screen and the
// plain output both show.
//
// The kernel counts PostgreSQL's queries by statement identity and sends
// a record only of some (slow, drawn for a sample, or that no identity
// counts: MySQL's, those without a query id, pipelines'). A fingerprint's
// row is then the statements' counts (AddStatements) plus the records not
// counted in the kernel (Observe); a record the kernel counted
// (model.Query.Counted) only names a backend's last query and joins the
// recent queries. The statements' counts have no backend: a backend whose
// queries the kernel counted gets its row from what the kernel keeps per
// process and thread (AddBackends: queries begun, the time and boxes of
// those ended, file system calls, block requests).
//
// Memory is bounded whatever the workload: rows are kept per interval, at
// most maxRows of each kind, and the recent queries of at most
// maxFingerprints fingerprints, the busiest.
package top

import (
	"cmp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dbiolat/dbiolat/internal/model"
)

const (
	// maxRows bounds the rows of one interval, per table: a query beyond
	// it is counted (Snapshot.Unlisted), not listed. Ten thousand distinct
	// fingerprints in a second is a flood no screen shows anyway.
	maxRows = 10000
	// maxFingerprints bounds the fingerprints whose recent queries are
	// kept (RecentKept each, for the slow-log view). At each interval's end
	// the least busy go beyond maxFingerprints-newcomers, so that as many
	// new ones can enter in the next interval.
	maxFingerprints = 1000
	newcomers       = 100
	// Slow and Sample choose the queries the kernel sends as records
	// besides those it does not count (probe.Emit: MinQuery, Sample): the
	// recent queries a fingerprint's slow-log lines show. A share of one
	// in a hundred costs little at any rate (pgbench's 20,000 queries a
	// second send 200 records) and shows a busy fingerprint's queries at
	// once; a query of 10 ms or more is always one.
	Slow   = 10 * time.Millisecond
	Sample = 0.01
	// RecentKept is how many of a fingerprint's latest queries are kept.
	RecentKept = 20
	// recentTextMax bounds a kept query's text (--raw-sql: each differs
	// and may be 4 KiB): 1000 fingerprints' 20 queries must fit the memory
	// budget, and a slow-log line on a screen shows no more.
	recentTextMax = 512
)

// Stats is what the queries of one row spent in one interval.
type Stats struct {
	Calls    uint64
	TotalNs  uint64
	BoxNs    []uint64 // per box of the waterfall, in model.Boxes' order
	FSCount  uint64   // file system calls
	BlkCount uint64   // block requests they started
}

func (s *Stats) add(q *model.Query) {
	if s.BoxNs == nil {
		s.BoxNs = make([]uint64, len(model.Boxes))
	}
	s.Calls += uint64(q.Statements)
	s.TotalNs += q.QueryNs
	for i, b := range model.Boxes {
		s.BoxNs[i] += *b.Of(q)
	}
	s.FSCount += q.FSCount()
	s.BlkCount += q.BlkCount
}

func (s *Stats) fold(o *Stats) {
	if s.BoxNs == nil {
		s.BoxNs = make([]uint64, len(model.Boxes))
	}
	s.Calls += o.Calls
	s.TotalNs += o.TotalNs
	for i := range o.BoxNs {
		s.BoxNs[i] += o.BoxNs[i]
	}
	s.FSCount += o.FSCount
	s.BlkCount += o.BlkCount
}

// Cell is what the queries of one fingerprint, run by one user on one
// database from one application in one role, spent in an interval: the
// grain a filter selects and a fingerprint's row sums.
type Cell struct {
	Fingerprint, Query, Database, User, Application, Role string
	// QueryID is PostgreSQL's query id of its queries, when those that
	// have one agree (a fingerprint's in several databases have several:
	// the id covers the relations' OIDs); 0 when none has or they differ.
	QueryID int64
	mixed   bool // queries of different ids were seen
	Stats
}

// noteQueryID counts a query id of the cell's queries (0: none).
func (c *Cell) noteQueryID(id int64) {
	switch {
	case id == 0 || c.mixed || id == c.QueryID:
	case c.QueryID == 0:
		c.QueryID = id
	default:
		c.QueryID, c.mixed = 0, true
	}
}

// Backend is what one backend's queries spent in an interval, and its
// last query.
type Backend struct {
	PID          int
	ConnectionID uint32 // a MySQL server's connection (its threads are not the connection)
	Database     string
	User         string
	Application  string // as its last query named it
	Role         string
	Fingerprint  string // of its last query
	Query        string
	QueryID      int64 // of its last query: PostgreSQL's query id, 0: none
	// Counted: the kernel counted its queries (AddBackends): Calls are the
	// queries it began, its time that of those it ended, FSCount and
	// BlkCount its process's.
	Counted bool
	Stats
}

// Snapshot is one interval as the aggregator saw it, before any filter or
// sort.
type Snapshot struct {
	TS      time.Time // the interval's end
	Seconds float64
	Since   time.Time // when the trace started
	Servers string    // what is traced
	Queries uint64    // queries the kernel saw finish, recorded or not
	Cells   []Cell
	// Backends, in no order.
	Backends []Backend
	// Unlisted counts the queries left out of the fingerprints' and the
	// backends' rows, beyond maxRows in the interval.
	UnlistedFingerprints, UnlistedBackends uint64
	Rates                                  []model.Rate
	Drops                                  model.Drops // since the trace started
}

type cellKey struct{ fp, db, user, app, role string }

type backendKey struct {
	pid  int
	conn uint32
}

// recent is a fingerprint's latest queries, a ring.
type recent struct {
	text    string // the fingerprint's text, shared by the queries kept
	queries []model.Query
	next    int    // where the next query goes once full
	ns      uint64 // query time in the current interval: how busy it is
	seen    int    // the last interval it ran in
}

func (r *recent) push(q *model.Query) {
	c := *q
	c.Waits = nil // a slow-log line does not show them
	switch {
	case c.Query == r.text:
		c.Query = r.text // one copy of the text, not one per query
	case len(c.Query) > recentTextMax:
		c.Query = cut(c.Query, recentTextMax) + "..."
	}
	if len(r.queries) < RecentKept {
		r.queries = append(r.queries, c)
		return
	}
	r.queries[r.next] = c
	r.next = (r.next + 1) % RecentKept
}

// cut shortens s to at most n bytes, on a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Aggregator sums query records into the current interval's rows. It is
// not safe for concurrent use: its caller serializes.
type Aggregator struct {
	servers  string
	since    time.Time
	cells    map[cellKey]*Cell
	backends map[backendKey]*Backend
	// last: each backend's session and last query, kept from interval to
	// interval while it runs queries: a backend the kernel counted may
	// send no record in an interval.
	last                   map[backendKey]Backend
	recents                map[string]*recent
	interval               int // intervals ended
	unlistedFP, unlistedBE uint64
}

// New makes an aggregator.
func New() *Aggregator {
	return &Aggregator{cells: map[cellKey]*Cell{}, backends: map[backendKey]*Backend{}, last: map[backendKey]Backend{}, recents: map[string]*recent{}}
}

// Start says what the trace follows, once attached, and since when: what
// the snapshots' header shows.
func (a *Aggregator) Start(servers string, since time.Time) { a.servers, a.since = servers, since }

// Servers says anew what is traced: a server started or restarted since.
func (a *Aggregator) Servers(servers string) { a.servers = servers }

// Observe counts one finished query in the current interval, unless the
// kernel counted it (AddStatements, AddBackends have it): then it only
// names its backend's last query. Either way it joins its fingerprint's
// recent queries.
func (a *Aggregator) Observe(q *model.Query) {
	if !q.Counted {
		a.cell(q).add(q, &a.unlistedFP)
	}

	bk := backendKey{q.PID, q.ConnectionID}
	if b := a.backend(bk); b != nil {
		// The last query's session: a MySQL connection may change user or
		// database, a PostgreSQL one its application_name.
		b.Database, b.User, b.Application, b.Role = q.Database, q.User, q.Application, q.Role
		b.Fingerprint, b.Query, b.QueryID = q.Fingerprint, q.Query, q.QueryID
		switch {
		case q.Counted: // its time is in its statement's counts, not in any backend's
			b.Counted = true
		case !b.Counted:
			b.add(q)
		}
	} else if !q.Counted {
		a.unlistedBE += uint64(q.Statements)
	}

	r := a.recents[q.Fingerprint]
	if r == nil && len(a.recents) < maxFingerprints {
		r = &recent{text: q.Query}
		a.recents[q.Fingerprint] = r
	}
	if r != nil {
		r.push(q)
		r.ns += q.QueryNs
		r.seen = a.interval
	}
}

// cell is the current interval's cell of a query's fingerprint, session
// and role; nil beyond maxRows.
func (a *Aggregator) cell(q *model.Query) *Cell {
	k := cellKey{q.Fingerprint, q.Database, q.User, q.Application, q.Role}
	c := a.cells[k]
	if c == nil && len(a.cells) < maxRows {
		c = &Cell{Fingerprint: q.Fingerprint, Query: q.Query, Database: q.Database, User: q.User, Application: q.Application, Role: q.Role}
		a.cells[k] = c
	}
	return c
}

// add counts a query (or the sums of a statement identity's) in the cell,
// or as unlisted when there is none.
func (c *Cell) add(q *model.Query, unlisted *uint64) {
	if c == nil {
		*unlisted += uint64(q.Statements)
		return
	}
	c.Stats.add(q)
	c.noteQueryID(q.QueryID)
}

// backend is the current interval's row of a backend, begun with what
// was last known of it; nil beyond maxRows.
func (a *Aggregator) backend(k backendKey) *Backend {
	b := a.backends[k]
	if b == nil && len(a.backends) < maxRows {
		last := a.last[k]
		b = &Backend{PID: k.pid, ConnectionID: k.conn, Database: last.Database, User: last.User, Application: last.Application,
			Role: last.Role, Fingerprint: last.Fingerprint, Query: last.Query, QueryID: last.QueryID}
		a.backends[k] = b
	}
	return b
}

// AddStatements counts what the kernel counted under statement identities
// in the interval (session.Statements): each identity's sums, labelled
// as the record that named it.
func (a *Aggregator) AddStatements(cs []model.StatementCounts) {
	for _, c := range cs {
		a.cell(c.Sums).add(c.Sums, &a.unlistedFP)
	}
}

// AddBackends gives the backends whose queries the kernel counted their
// rows for the interval (session.Backends): the queries they began, the
// time of those they ended, their file system calls and block requests.
// A backend whose queries all came as records (none counted in the
// kernel: as many or more statements recorded than begun) keeps the row
// its records made.
func (a *Aggregator) AddBackends(bs []model.BackendCounts) {
	for _, kb := range bs {
		b := a.backend(backendKey{kb.PID, 0})
		if b == nil {
			a.unlistedBE += kb.Queries
			continue
		}
		if b.Role == "" { // no record of it yet: its process's title says
			b.Database, b.User, b.Role = kb.Database, kb.User, kb.Role
		}
		if !b.Counted && kb.Queries <= b.Calls && (kb.Queries > 0 || b.Calls > 0) {
			continue
		}
		b.Counted = true
		b.Stats = Stats{}
		if kb.Time != nil {
			b.Stats.add(kb.Time)
		}
		b.Stats.Calls, b.Stats.FSCount, b.Stats.BlkCount = kb.Queries, kb.FSCount, kb.BlkCount
	}
}

// Tick ends the current interval with the session's interval (its rates,
// drops and queries seen) and returns its snapshot.
func (a *Aggregator) Tick(iv *model.Interval) *Snapshot {
	s := &Snapshot{TS: iv.TS, Seconds: iv.Seconds, Since: a.since, Servers: a.servers, Queries: iv.Queries,
		Rates: iv.Rates, Drops: iv.Drops, UnlistedFingerprints: a.unlistedFP, UnlistedBackends: a.unlistedBE}
	s.Cells = make([]Cell, 0, len(a.cells))
	for _, c := range a.cells {
		s.Cells = append(s.Cells, *c)
	}
	s.Backends = make([]Backend, 0, len(a.backends))
	for _, b := range a.backends {
		s.Backends = append(s.Backends, *b)
	}
	// What is known of the backends of the interval, for the next: those
	// that ran none in it are forgotten (bounded as the rows are).
	a.last = make(map[backendKey]Backend, len(a.backends))
	for k, b := range a.backends {
		a.last[k] = Backend{Database: b.Database, User: b.User, Application: b.Application, Role: b.Role,
			Fingerprint: b.Fingerprint, Query: b.Query, QueryID: b.QueryID}
	}
	// Fresh maps: a burst of rows must not keep its maps' size.
	a.cells, a.backends = map[cellKey]*Cell{}, map[backendKey]*Backend{}
	a.unlistedFP, a.unlistedBE = 0, 0
	a.evict()
	a.interval++
	return s
}

// evict keeps the recent queries of the busiest fingerprints: the most
// query time in the interval ending, then the most recently run.
func (a *Aggregator) evict() {
	if keep := maxFingerprints - newcomers; len(a.recents) > keep {
		fps := make([]string, 0, len(a.recents))
		for fp := range a.recents {
			fps = append(fps, fp)
		}
		slices.SortFunc(fps, func(x, y string) int {
			rx, ry := a.recents[x], a.recents[y]
			return cmp.Or(cmp.Compare(ry.ns, rx.ns), cmp.Compare(ry.seen, rx.seen), strings.Compare(x, y))
		})
		for _, fp := range fps[keep:] {
			delete(a.recents, fp)
		}
	}
	for _, r := range a.recents {
		r.ns = 0
	}
}

// Recent returns a fingerprint's latest queries, the newest first (nil
// when none is kept).
func (a *Aggregator) Recent(fp string) []model.Query {
	r := a.recents[fp]
	if r == nil {
		return nil
	}
	out := make([]model.Query, 0, len(r.queries))
	for i := range r.queries {
		// The newest is just before next (next is 0 until the ring is full).
		j := (r.next - 1 - i + 2*len(r.queries)) % len(r.queries)
		out = append(out, r.queries[j])
	}
	return out
}
