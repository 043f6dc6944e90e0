package top

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
)

// Row is one line of a table: a fingerprint's, or a backend's (with its
// PID, session and last query).
type Row struct {
	Fingerprint string `json:"fingerprint"`
	Query       string `json:"query"` // a backend's: its last query
	// QueryID is PostgreSQL's query id of the row's queries when they
	// share one (a backend's: its last query's); absent otherwise.
	QueryID      int64  `json:"queryid,omitempty"`
	PID          int    `json:"pid,omitempty"`
	ConnectionID uint32 `json:"connection_id,omitempty"`
	Database     string `json:"database,omitempty"`
	User         string `json:"user,omitempty"`
	Application  string `json:"application,omitempty"`
	Role         string `json:"role,omitempty"`
	Calls        uint64 `json:"calls"`
	// CallsPerSec: the calls over the interval's measured length.
	CallsPerSec float64  `json:"calls_per_sec"`
	TotalNs     uint64   `json:"total_ns"`
	MeanNs      uint64   `json:"mean_ns"`
	BoxNs       []uint64 `json:"-"` // per box of the waterfall (model.Boxes); in JSON by the boxes' names
	FSCount     uint64   `json:"fs_count"`
	BlkCount    uint64   `json:"blk_count"`
	// KernelCounted: a backend whose queries the kernel counted by
	// statement: Calls are the queries it began, its time that of those it
	// ended, FSCount and BlkCount its process's.
	KernelCounted bool `json:"kernel_counted,omitempty"`
}

func row(s *Stats, seconds float64) Row {
	r := Row{Calls: s.Calls, TotalNs: s.TotalNs, BoxNs: s.BoxNs, FSCount: s.FSCount, BlkCount: s.BlkCount}
	if seconds > 0 {
		r.CallsPerSec = float64(s.Calls) / seconds
	}
	if s.Calls > 0 {
		r.MeanNs = s.TotalNs / s.Calls
	}
	return r
}

// MarshalJSON writes the waterfall's boxes flat, by the names a query
// record gives them ("cpu_ns", "io_wait_ns"...), after the other fields.
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row // without this method
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as output.JSON: query text as it is
	if err := enc.Encode(plain(r)); err != nil {
		return nil, err
	}
	b := bytes.TrimRight(buf.Bytes(), "\n}")
	for i, box := range model.Boxes {
		var ns uint64
		if i < len(r.BoxNs) {
			ns = r.BoxNs[i]
		}
		b = strconv.AppendUint(append(append(append(b, ",\""...), box.Name...), "\":"...), ns, 10)
	}
	return append(b, '}'), nil
}

// Filter selects rows by their session: "" matches anything.
type Filter struct {
	Database    string `json:"database,omitempty"`
	User        string `json:"user,omitempty"`
	Application string `json:"application,omitempty"`
	Role        string `json:"role,omitempty"`
}

func (f Filter) match(db, user, app, role string) bool {
	return (f.Database == "" || f.Database == db) && (f.User == "" || f.User == user) &&
		(f.Application == "" || f.Application == app) && (f.Role == "" || f.Role == role)
}

// String is the filter as ParseFilter reads it: "database=shop user=app".
func (f Filter) String() string {
	var parts []string
	for _, p := range [][2]string{{"database", f.Database}, {"user", f.User}, {"application", f.Application}, {"role", f.Role}} {
		if p[1] != "" {
			parts = append(parts, p[0]+"="+p[1])
		}
	}
	return strings.Join(parts, " ")
}

var filterKey = regexp.MustCompile(`(?:^|\s)(database|db|user|application|app|role)=`)

// ParseFilter reads "database=D user=U application=A role=R" (any of
// them, db for database, app for application; a value runs to the next
// name=, so a role or an application may have spaces: "role=client
// backend"); "" is no filter.
func ParseFilter(s string) (Filter, error) {
	var f Filter
	s = strings.TrimSpace(s)
	keys := filterKey.FindAllStringSubmatchIndex(s, -1)
	if s != "" && (len(keys) == 0 || strings.TrimSpace(s[:keys[0][0]]) != "") {
		return f, fmt.Errorf("filter %q: give database=NAME, user=NAME, application=NAME or role=NAME", s)
	}
	for i, k := range keys {
		end := len(s)
		if i+1 < len(keys) {
			end = keys[i+1][0]
		}
		value := strings.TrimSpace(s[k[1]:end])
		switch s[k[2]:k[3]] {
		case "database", "db":
			f.Database = value
		case "user":
			f.User = value
		case "application", "app":
			f.Application = value
		case "role":
			f.Role = value
		}
	}
	return f, nil
}

// tables says which tables show a column.
type tables uint8

const (
	fingerprints tables = 1 << iota
	backends
	both = fingerprints | backends
)

// column is one column of the tables: its name (for --sort), its header,
// its width (0: the rest of the line), how a row shows in it and how two
// rows compare by it (ascending).
type column struct {
	name, title string
	width       int
	in          tables
	desc        bool // sorted the largest first unless reversed
	text        func(*Row) string
	cmp         func(a, b *Row) int
}

// boxColumns are the waterfall's boxes (model.Boxes) as the five columns
// a line has room for: I/O wait with asynchronous I/O wait, both lock
// kinds together, and other with what no box explains. A test checks that
// every box is in exactly one.
var boxColumns = []struct {
	name, title string
	boxes       []string
}{
	{"cpu", "CPU", []string{"cpu_ns"}},
	{"runq", "RUNQ", []string{"runq_ns"}},
	{"io", "IO", []string{"io_wait_ns", "aio_wait_ns"}},
	{"lock", "LOCK", []string{"lock_ns", "lwlock_ns"}},
	{"other", "OTHER", []string{"other_wait_ns", "unaccounted_ns"}},
}

// columns in the order the keys move the sort through them. The widths
// leave a 120-column line 53 characters of query text in the
// fingerprints' table (a test checks it).
var columns = buildColumns()

func buildColumns() []column {
	num := func(f func(*Row) uint64) func(a, b *Row) int {
		return func(a, b *Row) int { return cmp.Compare(f(a), f(b)) }
	}
	cols := []column{
		{name: "pid", title: "PID", width: 7, in: backends, desc: true, text: pidText,
			cmp: func(a, b *Row) int {
				return cmp.Or(cmp.Compare(a.PID, b.PID), cmp.Compare(a.ConnectionID, b.ConnectionID))
			}},
		{name: "who", title: "USER@DB", width: 16, in: backends, text: who,
			cmp: func(a, b *Row) int { return strings.Compare(who(a), who(b)) }},
		{name: "app", title: "APP", width: 10, in: backends, text: func(r *Row) string { return r.Application },
			cmp: func(a, b *Row) int { return strings.Compare(a.Application, b.Application) }},
		{name: "calls", title: "CALLS", width: 5, in: both, desc: true,
			text: func(r *Row) string { return count(r.Calls) }, cmp: num(func(r *Row) uint64 { return r.Calls })},
		{name: "calls/s", title: "CALLS/S", width: 7, in: both, desc: true, text: func(r *Row) string { return perSec(r.CallsPerSec) },
			cmp: func(a, b *Row) int { return cmp.Compare(a.CallsPerSec, b.CallsPerSec) }},
		{name: "total", title: "TOTAL", width: 6, in: both, desc: true,
			text: func(r *Row) string { return dur(r.TotalNs) }, cmp: num(func(r *Row) uint64 { return r.TotalNs })},
		{name: "mean", title: "MEAN", width: 6, in: both, desc: true,
			text: func(r *Row) string { return dur(r.MeanNs) }, cmp: num(func(r *Row) uint64 { return r.MeanNs })},
	}
	index := map[string]int{}
	for i, b := range model.Boxes {
		index[b.Name] = i
	}
	for _, bc := range boxColumns {
		var which []int
		for _, name := range bc.boxes {
			i, ok := index[name]
			if !ok {
				panic("top: no waterfall box " + name)
			}
			which = append(which, i)
		}
		ns := func(r *Row) uint64 {
			var sum uint64
			for _, i := range which {
				if i < len(r.BoxNs) {
					sum += r.BoxNs[i]
				}
			}
			return sum
		}
		// Shown as a share of the query time; sorted by the time itself:
		// the fingerprint with the most I/O wait, not the one whose single
		// call was all I/O wait.
		cols = append(cols, column{name: bc.name, title: bc.title, width: max(4, len(bc.title)), in: both, desc: true,
			text: func(r *Row) string { return share(ns(r), r.TotalNs) }, cmp: num(ns)})
	}
	return append(cols,
		column{name: "fs", title: "FS", width: 5, in: both, desc: true,
			text: func(r *Row) string { return count(r.FSCount) }, cmp: num(func(r *Row) uint64 { return r.FSCount })},
		column{name: "blk", title: "BLK", width: 5, in: both, desc: true,
			text: func(r *Row) string { return count(r.BlkCount) }, cmp: num(func(r *Row) uint64 { return r.BlkCount })},
		column{name: "query", title: "QUERY", in: both, text: func(r *Row) string { return output.OneLine(r.Query) },
			cmp: func(a, b *Row) int { return strings.Compare(a.Query, b.Query) }},
	)
}

var dur = output.Format(hist.Time) // durations, as every output writes them

func pidText(r *Row) string {
	if r.ConnectionID != 0 { // a MySQL connection: the server's PID is every connection's
		return "#" + strconv.FormatUint(uint64(r.ConnectionID), 10)
	}
	return strconv.Itoa(r.PID)
}

// who names a backend's session as the slow log does: user@database.
func who(r *Row) string {
	return output.Who(&model.Query{User: r.User, Database: r.Database, Role: r.Role})
}

// count writes a count in at most 5 characters: 12345, 123k, 12.3M.
func count(n uint64) string {
	switch {
	case n < 100000:
		return strconv.FormatUint(n, 10)
	case n < 10000000:
		return strconv.FormatUint(n/1000, 10) + "k"
	}
	return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
}

// perSec writes a rate in at most 7 characters.
func perSec(x float64) string {
	switch {
	case x < 1000:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case x < 10000000:
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x/1e6, 'f', 1, 64) + "M"
}

func share(part, whole uint64) string {
	if whole == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 0, 64) + "%"
}

func columnOf(name string) (int, bool) {
	i := slices.IndexFunc(columns, func(c column) bool { return c.name == name })
	return i, i >= 0
}

// ColumnNames lists the columns a table can be sorted by.
func ColumnNames() []string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.name
	}
	return names
}

// sortRows sorts rows by a column, in its order (the largest first for
// numbers) or reversed; ties go to the most total time, then the most
// calls (backends the kernel counted have no time), then by fingerprint
// and PID, so that the order is stable.
func sortRows(rows []Row, c *column, reverse bool) {
	slices.SortFunc(rows, func(a, b Row) int {
		by := c.cmp(&a, &b)
		if c.desc != reverse {
			by = -by
		}
		return cmp.Or(by, cmp.Compare(b.TotalNs, a.TotalNs), cmp.Compare(b.Calls, a.Calls), strings.Compare(a.Fingerprint, b.Fingerprint),
			cmp.Compare(a.PID, b.PID), cmp.Compare(a.ConnectionID, b.ConnectionID))
	})
}

// Frame is a snapshot as a view shows it: its rows filtered and sorted.
// --json prints it as one object per interval.
type Frame struct {
	Type          string       `json:"type"` // "top"
	TS            time.Time    `json:"ts"`
	Seconds       float64      `json:"seconds"`
	Since         time.Time    `json:"since"`
	Servers       string       `json:"servers"`
	Queries       uint64       `json:"queries"`
	QueriesPerSec float64      `json:"queries_per_sec"`
	Sort          string       `json:"sort"`
	Reverse       bool         `json:"reverse,omitempty"`
	Filter        Filter       `json:"filter"`
	Fingerprints  []Row        `json:"fingerprints"`
	Backends      []Row        `json:"backends"`
	Rates         []model.Rate `json:"rates"`
	Drops         model.Drops  `json:"drops"`
	// Queries left out of the rows beyond the bound of rows in an interval.
	UnlistedFingerprints uint64 `json:"unlisted_fingerprint_calls,omitempty"`
	UnlistedBackends     uint64 `json:"unlisted_backend_calls,omitempty"`
}

// View is what the user chose: the sort, the filter, the fingerprint
// selected, whether the display is frozen or shows a fingerprint's recent
// queries, and a prompt being typed.
type View struct {
	Sort    string
	Reverse bool
	Filter  Filter
	Frozen  bool
	Detail  bool   // the selected fingerprint's recent queries, instead of the tables
	Status  string // a message on the last line until the next key
	// The selection: a fingerprint, followed as the rows move; its index,
	// where the selection stays when the fingerprint is gone.
	selected string
	index    int
	offset   int // the first fingerprint row shown (scrolling)
	prompt   *prompt
}

// NewView checks a sort column's name and makes a view.
func NewView(sort string, f Filter) (*View, error) {
	if _, ok := columnOf(sort); !ok {
		return nil, fmt.Errorf("--sort %q: sort by one of %s", sort, strings.Join(ColumnNames(), ", "))
	}
	return &View{Sort: sort, Filter: f}, nil
}

// Selected is the fingerprint selected ("" for none).
func (v *View) Selected() string { return v.selected }

// Frame filters and sorts a snapshot's rows and follows the selection.
func (v *View) Frame(s *Snapshot) *Frame {
	f := &Frame{Type: "top", Sort: v.Sort, Reverse: v.Reverse, Filter: v.Filter, Fingerprints: []Row{}, Backends: []Row{}, Rates: []model.Rate{}}
	if s == nil {
		return f
	}
	f.TS, f.Seconds, f.Since, f.Servers, f.Queries, f.Drops = s.TS, s.Seconds, s.Since, s.Servers, s.Queries, s.Drops
	f.UnlistedFingerprints, f.UnlistedBackends = s.UnlistedFingerprints, s.UnlistedBackends
	if s.Seconds > 0 {
		f.QueriesPerSec = float64(s.Queries) / s.Seconds
	}
	sums := map[string]*Cell{}
	for i := range s.Cells {
		c := &s.Cells[i]
		if !v.Filter.match(c.Database, c.User, c.Application, c.Role) {
			continue
		}
		sum := sums[c.Fingerprint]
		if sum == nil {
			sum = &Cell{Fingerprint: c.Fingerprint, Query: c.Query}
			sums[c.Fingerprint] = sum
		}
		sum.fold(&c.Stats)
		if c.mixed {
			sum.QueryID, sum.mixed = 0, true
		} else {
			sum.noteQueryID(c.QueryID)
		}
	}
	for _, c := range sums {
		r := row(&c.Stats, s.Seconds)
		r.Fingerprint, r.Query, r.QueryID = c.Fingerprint, c.Query, c.QueryID
		f.Fingerprints = append(f.Fingerprints, r)
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		if !v.Filter.match(b.Database, b.User, b.Application, b.Role) {
			continue
		}
		r := row(&b.Stats, s.Seconds)
		r.Fingerprint, r.Query, r.QueryID, r.PID, r.ConnectionID = b.Fingerprint, b.Query, b.QueryID, b.PID, b.ConnectionID
		r.Database, r.User, r.Application, r.Role = b.Database, b.User, b.Application, b.Role
		r.KernelCounted = b.Counted
		f.Backends = append(f.Backends, r)
	}
	for _, r := range s.Rates {
		if v.Filter.Role == "" || v.Filter.Role == r.Role {
			f.Rates = append(f.Rates, r)
		}
	}
	i, _ := columnOf(v.Sort)
	c := &columns[i]
	sortBy := func(rows []Row, t tables) {
		if c.in&t != 0 {
			sortRows(rows, c, v.Reverse)
		} else { // a column this table lacks: the busiest first
			total, _ := columnOf("total")
			sortRows(rows, &columns[total], false)
		}
	}
	sortBy(f.Fingerprints, fingerprints)
	sortBy(f.Backends, backends)
	v.follow(f.Fingerprints)
	return f
}

// follow keeps the selection on its fingerprint as the rows move, or at
// its place when the fingerprint is gone.
func (v *View) follow(rows []Row) {
	if i := slices.IndexFunc(rows, func(r Row) bool { return r.Fingerprint == v.selected }); i >= 0 {
		v.index = i
	}
	v.index = max(0, min(v.index, len(rows)-1))
	if len(rows) > 0 {
		v.selected = rows[v.index].Fingerprint
	}
}

// Key is a key pressed: a character, or one of the special keys.
type Key struct {
	Rune    rune
	Special Special
}

// Special names the keys that are not characters.
type Special int

const (
	NoSpecial Special = iota
	Up
	Down
	Left
	Right
	PageUp
	PageDown
	Enter
	Esc
	Backspace
	CtrlC
)

// Action is what a key asks of the program.
type Action int

const (
	Redraw Action = iota
	Quit
)

// prompt is a line being typed: a filter, or one of its parts.
type prompt struct {
	label string
	text  []rune
	apply func(v *View, text string) error
}

// Help is the keys, on the last line.
const Help = "q quit  </> sort  r reverse  / filter (d database, u user, a app, R role)  f freeze  up/down select  Enter slow log"

// pageRows is how far PageUp and PageDown move the selection.
const pageRows = 10

// Key applies a key to the view and says whether to quit.
func (v *View) Key(k Key) Action {
	if k.Special == CtrlC {
		return Quit
	}
	v.Status = ""
	if v.prompt != nil {
		p := v.prompt
		switch {
		case k.Special == Esc:
			v.prompt = nil
		case k.Special == Enter:
			v.prompt = nil
			if err := p.apply(v, string(p.text)); err != nil {
				v.Status = err.Error()
			}
		case k.Special == Backspace:
			if len(p.text) > 0 {
				p.text = p.text[:len(p.text)-1]
			}
		case k.Special == NoSpecial && k.Rune >= ' ':
			p.text = append(p.text, k.Rune)
		}
		return Redraw
	}
	if v.Detail {
		switch {
		case k.Rune == 'q':
			return Quit
		case k.Special == Esc, k.Special == Enter, k.Special == Left, k.Special == Backspace, k.Rune == 'l', k.Rune == 'h':
			v.Detail = false
		case k.Rune == 'f' || k.Rune == ' ':
			v.Frozen = !v.Frozen
		}
		return Redraw
	}
	switch {
	case k.Rune == 'q', k.Special == Esc:
		return Quit
	case k.Rune == '<', k.Special == Left:
		v.moveSort(-1)
	case k.Rune == '>', k.Special == Right:
		v.moveSort(1)
	case k.Rune == 'r':
		v.Reverse = !v.Reverse
	case k.Rune == 'f', k.Rune == ' ':
		v.Frozen = !v.Frozen
	case k.Special == Up, k.Rune == 'k':
		v.move(-1)
	case k.Special == Down, k.Rune == 'j':
		v.move(1)
	case k.Special == PageUp:
		v.move(-pageRows)
	case k.Special == PageDown:
		v.move(pageRows)
	case k.Special == Enter, k.Rune == 'l':
		if v.selected != "" {
			v.Detail = true
		}
	case k.Rune == '/':
		v.prompt = &prompt{label: "filter (database=, user=, application=, role=; empty: none): ", text: []rune(v.Filter.String()),
			apply: func(v *View, text string) error {
				f, err := ParseFilter(text)
				if err == nil {
					v.Filter = f
				}
				return err
			}}
	case k.Rune == 'd':
		v.prompt = &prompt{label: "database (empty: any): ", text: []rune(v.Filter.Database),
			apply: func(v *View, text string) error { v.Filter.Database = strings.TrimSpace(text); return nil }}
	case k.Rune == 'u':
		v.prompt = &prompt{label: "user (empty: any): ", text: []rune(v.Filter.User),
			apply: func(v *View, text string) error { v.Filter.User = strings.TrimSpace(text); return nil }}
	case k.Rune == 'a':
		v.prompt = &prompt{label: "application (empty: any): ", text: []rune(v.Filter.Application),
			apply: func(v *View, text string) error { v.Filter.Application = strings.TrimSpace(text); return nil }}
	case k.Rune == 'R':
		v.prompt = &prompt{label: "role (empty: any): ", text: []rune(v.Filter.Role),
			apply: func(v *View, text string) error { v.Filter.Role = strings.TrimSpace(text); return nil }}
	}
	return Redraw
}

// moveSort moves the sort to the next column (by) or the previous one.
func (v *View) moveSort(by int) {
	i, _ := columnOf(v.Sort)
	v.Sort = columns[(i+by+len(columns))%len(columns)].name
}

// move moves the selection by rows; the next Frame clamps it.
func (v *View) move(by int) {
	v.index = max(0, v.index+by)
	v.selected = "" // taken at the new index by the next Frame
}
