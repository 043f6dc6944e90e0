package session

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dbiolat/dbiolat/internal/postgres"
)

// statements holds each backend's prepared statements and named portals,
// learned from the round trips that prepared or bound them, so that a
// later Bind or Execute that names one finds its text. The kernel sends
// every round trip that prepares a named statement, or binds a named
// portal it suspends, whatever the thresholds.
type statements map[uint32]map[named]string

// named is a statement ('S') or portal ('P') by name, as the protocol's
// Describe and Close name them.
type named struct {
	kind byte
	name string
}

// maxStatements bounds what one backend's statements may hold; a client
// that prepares more without closing them loses some of the texts
// (their queries then show the statement's name).
const maxStatements = 1000

// roundTrip reads a round trip of backend pid and learns what it prepared,
// bound and closed.
func (st statements) roundTrip(pid uint32, msgs []byte) postgres.RoundTrip {
	known := st[pid]
	rt := postgres.ParseRoundTrip(msgs, func(kind byte, name string) (string, bool) {
		t, ok := known[named{kind, name}]
		return t, ok
	})
	for _, name := range rt.Closed {
		delete(known, named{'S', name})
	}
	learn := func(kind byte, s postgres.Statement) {
		if known == nil {
			known = map[named]string{}
			st[pid] = known
		}
		if len(known) >= maxStatements {
			for k := range known {
				delete(known, k)
				break
			}
		}
		known[named{kind, s.Name}] = s.Text
	}
	for _, s := range rt.Prepared {
		learn('S', s)
	}
	for _, s := range rt.Portals {
		learn('P', s)
	}
	return rt
}

// pipelines holds, per backend, the texts of its current round trip's
// statements by their place in it. A long pipeline's later reads replace
// the captured bytes before the replies of the statements they held go
// out; the kernel sends each capture before replacing it, with the place
// of its first statement, so that a record finds its statements' texts
// here.
type pipelines map[uint32]*pipeline

type pipeline struct {
	first int      // the place of texts[0] in the round trip
	texts []string // at most maxPipelineTexts; "": not captured
}

const maxPipelineTexts = 4096

// learn adds the texts of statements first, first+1... of backend pid's
// round trip. A round trip's first capture (first 0) starts a new one.
func (ps pipelines) learn(pid uint32, first int, texts []string) *pipeline {
	p := ps[pid]
	if p == nil {
		p = &pipeline{}
		ps[pid] = p
	}
	if first == 0 || first < p.first || first-p.first > maxPipelineTexts {
		p.first, p.texts = first, p.texts[:0]
	}
	for len(p.texts) < first-p.first { // statements no capture held
		p.texts = append(p.texts, "")
	}
	for i, t := range texts {
		if at := first + i - p.first; at < len(p.texts) {
			p.texts[at] = t
		} else {
			p.texts = append(p.texts, t)
		}
	}
	if over := len(p.texts) - maxPipelineTexts; over > 0 {
		p.first += over
		p.texts = slices.Delete(p.texts, 0, over)
	}
	return p
}

// textOf is the text of a record holding n statements from the round
// trip's place first on: each distinct text once, in order (a batch's are
// one text); for a round trip that ran none, what it did (query).
func (p *pipeline) textOf(first, n int, query string) string {
	if n == 0 && first == 0 && p.first == 0 && len(p.texts) == 0 {
		return query
	}
	n = max(n, 1)
	var texts []string
	for i := max(first, p.first); i < min(first+n, p.first+len(p.texts)); i++ {
		if t := p.texts[i-p.first]; t != "" && !slices.Contains(texts, t) {
			texts = append(texts, t)
		}
	}
	if len(texts) == 0 {
		return fmt.Sprintf("-- statements %d to %d of a pipeline, past the bytes captured", first+1, first+n)
	}
	return strings.Join(texts, ";\n")
}

// suspended holds, per backend, the statements whose portal a round trip
// left suspended at its row limit and that no record counted yet, newest
// last. PostgreSQL counts such a statement when it ends the portal, which
// a later round trip may do (a Close, a new unnamed portal, the
// transaction's commit): the kernel then sends a record of them alone
// (portals_ended), named from here.
type suspended map[uint32][]openPortal

// openPortal is a suspended statement: the portal it runs in and its text.
type openPortal struct{ portal, text string }

// maxSuspended bounds what one backend's list may hold (the kernel says
// how many are open: a client seldom keeps more than a few).
const maxSuspended = 256

// opened: a record of backend pid left the statement p suspended; open
// is how many the kernel holds open after it. Those it no longer holds
// (completed or dropped without Go seeing it) are the oldest.
func (su suspended) opened(pid uint32, p openPortal, open int) {
	list := append(su[pid], p)
	if over := len(list) - min(max(open, 1), maxSuspended); over > 0 {
		list = slices.Delete(list, 0, over)
	}
	su[pid] = list
}

// ended: n of backend pid's suspended statements ended in a round trip
// whose messages did ps; returns their text (each distinct one once).
// Those its Closes name end first, then the unnamed portal's if it made a
// new one, then the newest.
func (su suspended) ended(pid uint32, n int, ps postgres.Portals) string {
	list := su[pid]
	var texts []string
	take := func(i int) {
		if !slices.Contains(texts, list[i].text) {
			texts = append(texts, list[i].text)
		}
		list = slices.Delete(list, i, i+1)
		n--
	}
	named := func(name string) int {
		for i := len(list) - 1; i >= 0; i-- {
			if list[i].portal == name {
				return i
			}
		}
		return -1
	}
	for _, name := range ps.Closed {
		if i := named(name); n > 0 && i >= 0 {
			take(i)
		}
	}
	if i := named(""); n > 0 && ps.Unnamed && i >= 0 {
		take(i)
	}
	for n > 0 && len(list) > 0 {
		take(len(list) - 1)
	}
	su[pid] = list
	if n > 0 {
		texts = append(texts, "-- a portal suspended before the trace began")
	}
	// What the bytes did not name ("-- ...") only when nothing else is known.
	if known := slices.DeleteFunc(slices.Clone(texts), func(t string) bool { return strings.HasPrefix(t, "-- ") }); len(known) > 0 {
		texts = known
	}
	return strings.Join(texts, ";\n")
}
