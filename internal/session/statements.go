package session

import (
	"bytes"
	"encoding/binary"
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
// statements by their place in it. A long pipeline's request is captured
// in parts (each read's bytes, a capture's worth at a time), each sent
// before the next replaces it, with the place of its first statement, so
// that a record finds its statements' texts here. A message cut by the end
// of a part is kept (tail) and completed by the next part, whose first
// bytes end it.
type pipelines map[uint32]*pipeline

type pipeline struct {
	first int      // the place of texts[0] in the round trip
	texts []string // at most maxPipelineTexts; "": not captured

	tail *tail // the message the last part ended inside, if any

	// The last capture read, and what it said: a record carrying it again
	// (every record of a pipeline carries the current part) is not read again.
	last        capture
	query       string
	cut, parsed bool
}

// capture is a record's captured messages, as the kernel sent them.
type capture struct {
	part  bool   // a later part of the round trip's request (probe.TextPGWirePart)
	first int    // the place of the statement of the first message that starts in it
	skip  int    // where that message starts: a part's bytes before it end the one the part before ended in
	at    uint32 // where text starts in the bytes the backend read since the round trip began
	text  []byte
}

// tail is a message cut by the end of a part: its first bytes (at most
// maxTail), and where it starts.
type tail struct {
	at    uint32 // where its first byte is in the backend's bytes
	seen  uint32 // its bytes seen in turn from there (those past maxTail not kept)
	place int    // the statements of the round trip before it
	b     []byte
}

const (
	maxPipelineTexts = 4096
	// maxTail bounds a cut message's bytes kept: its names, and the start
	// of a statement's text (a text is cut where a capture would cut it).
	maxTail = 8192
)

func (t *tail) add(b []byte) {
	t.seen += uint32(len(b))
	t.b = append(t.b, b[:min(len(b), maxTail-len(t.b))]...)
}

// size is the message's length with its type byte, once its header is seen.
func (t *tail) size() (uint32, bool) {
	if len(t.b) < 5 {
		return 0, false
	}
	return 1 + binary.BigEndian.Uint32(t.b[1:5]), true
}

// read learns what a record's captured messages of backend pid hold: the
// statements they prepare and the portals they bind (st), the texts of the
// statements they run by their place. It returns the pipeline, the round
// trip's query as postgres.RoundTrip has it, and whether the bytes were cut.
func (ps pipelines) read(st statements, pid uint32, c capture) (*pipeline, string, bool) {
	p := ps[pid]
	if p == nil {
		p = &pipeline{}
		ps[pid] = p
	}
	if p.parsed && c.part == p.last.part && c.first == p.last.first && c.skip == p.last.skip && c.at == p.last.at &&
		bytes.Equal(c.text, p.last.text) {
		return p, p.query, p.cut // read already
	}
	p.parsed = true
	p.last = capture{part: c.part, first: c.first, skip: c.skip, at: c.at, text: append(p.last.text[:0], c.text...)}
	skip := min(max(c.skip, 0), len(c.text))
	if !c.part {
		p.tail = nil
	} else if p.complete(st, pid, c, skip) && skip == len(c.text) {
		return p, p.query, p.cut // no message starts in it: the cut one goes on
	}
	rt := st.roundTrip(pid, c.text[skip:])
	p.learn(c.first, rt.Statements, !c.part)
	if rt.Tail > 0 {
		at := len(c.text) - rt.Tail
		p.tail = &tail{at: c.at + uint32(at), place: c.first + rt.TailAfter}
		p.tail.add(c.text[at:])
	}
	p.query, p.cut = rt.Query, rt.Cut
	return p, p.query, p.cut
}

// complete ends the message the part before ended inside with the first
// skip bytes of part c, and learns it; true if it goes on past c (no
// message starts in c). A part that does not follow where the message's
// bytes say it ends (a part lost, or not captured) drops it: its
// statement is then named by its place only.
func (p *pipeline) complete(st statements, pid uint32, c capture, skip int) bool {
	t := p.tail
	p.tail = nil
	if t == nil {
		return false
	}
	if t.at+t.seen == c.at { // the part's bytes follow the message's
		t.add(c.text[:skip])
	}
	size, ok := t.size()
	if skip == len(c.text) { // no message starts in c
		if !ok || t.at+size > c.at+uint32(len(c.text)) {
			p.tail = t
			return true
		}
		return false
	}
	if !ok || t.at+size != c.at+uint32(skip) {
		return false
	}
	// The kernel counts the Executes before the message at skip: the same
	// count here says the message is the one before it.
	if executes := t.place + b2i(t.b[0] == 'E'); executes != c.first {
		return false
	}
	rt := st.roundTrip(pid, t.b) // cut short if longer than maxTail: its names, its text's start
	p.learn(t.place, rt.Statements, false)
	return false
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// learn adds the texts of statements first, first+1... of the round
// trip; a round trip's first capture (starts) starts a new one.
func (p *pipeline) learn(first int, texts []string, starts bool) {
	if starts || first < p.first || first-p.first > maxPipelineTexts {
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
}

// textOf is the text of a record holding n statements from the round
// trip's place first on: each distinct text once, in order (a batch's are
// one text); for a round trip that ran none, what it did (query). unnamed
// says how many of them no capture held: the text then says where they are.
func (p *pipeline) textOf(first, n int, query string) (text string, unnamed int) {
	if n == 0 && first == 0 && p.first == 0 && len(p.texts) == 0 {
		return query, 0
	}
	statements := n
	n = max(n, 1)
	var texts []string
	for i := first; i < first+n; i++ {
		t := ""
		if i >= p.first && i < p.first+len(p.texts) {
			t = p.texts[i-p.first]
		}
		if t == "" {
			unnamed += b2i(i < first+statements)
		} else if !slices.Contains(texts, t) {
			texts = append(texts, t)
		}
	}
	if len(texts) == 0 {
		return fmt.Sprintf("-- statements %d to %d of a pipeline, past the bytes captured", first+1, first+n), unnamed
	}
	return strings.Join(texts, ";\n"), unnamed
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
