// Package top is dbiolat top's logic, without a terminal and without BPF:
// an aggregator fed the session's query records and intervals, which makes
// one Snapshot per interval (what each query fingerprint and each backend
// spent in it, and the I/O rates); a View of a snapshot (filtered, sorted,
// a fingerprint selected) as a Frame, which --json prints; and the
// rendering of a frame into lines of text for a width and height, which
// the screen and the plain output both show.
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
	servers                string
	since                  time.Time
	cells                  map[cellKey]*Cell
	backends               map[backendKey]*Backend
	recents                map[string]*recent
	interval               int // intervals ended
	unlistedFP, unlistedBE uint64
}

// New makes an aggregator.
func New() *Aggregator {
	return &Aggregator{cells: map[cellKey]*Cell{}, backends: map[backendKey]*Backend{}, recents: map[string]*recent{}}
}

// Start says what the trace follows, once attached, and since when: what
// the snapshots' header shows.
func (a *Aggregator) Start(servers string, since time.Time) { a.servers, a.since = servers, since }

// Servers says anew what is traced: a server started or restarted since.
func (a *Aggregator) Servers(servers string) { a.servers = servers }

// Observe counts one finished query in the current interval.
func (a *Aggregator) Observe(q *model.Query) {
	k := cellKey{q.Fingerprint, q.Database, q.User, q.Application, q.Role}
	c := a.cells[k]
	if c == nil && len(a.cells) < maxRows {
		c = &Cell{Fingerprint: q.Fingerprint, Query: q.Query, Database: q.Database, User: q.User, Application: q.Application, Role: q.Role}
		a.cells[k] = c
	}
	if c != nil {
		c.add(q)
		c.noteQueryID(q.QueryID)
	} else {
		a.unlistedFP++
	}

	bk := backendKey{q.PID, q.ConnectionID}
	b := a.backends[bk]
	if b == nil && len(a.backends) < maxRows {
		b = &Backend{PID: q.PID, ConnectionID: q.ConnectionID}
		a.backends[bk] = b
	}
	if b != nil {
		// The last query's session: a MySQL connection may change user or
		// database, a PostgreSQL one its application_name.
		b.Database, b.User, b.Application, b.Role = q.Database, q.User, q.Application, q.Role
		b.Fingerprint, b.Query, b.QueryID = q.Fingerprint, q.Query, q.QueryID
		b.add(q)
	} else {
		a.unlistedBE++
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
