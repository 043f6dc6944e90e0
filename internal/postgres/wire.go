package postgres

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"

	"github.com/dbiolat/dbiolat/internal/sqlnorm"
)

// The frontend half of PostgreSQL's protocol (version 3), as far as
// dbiolat reads it: which statement a round trip ran. The kernel copies
// the first bytes a backend reads in each round trip, from the first
// message to the Sync or simple Query that ends it
// (internal/probe/bpf/pgwire.bpf.c); this reads them.

// RoundTrip is what the messages of one round trip ran.
type RoundTrip struct {
	// Query is the SQL it ran: a simple Query's text, or the text of the
	// statement its first Bind names; for a round trip that only
	// prepares, the prepared text.
	Query string
	// Statements are the texts of the statements it ran, in order, as far
	// as the bytes go: each Execute's (a pipeline or a batch sends many
	// before one Sync), each of a simple Query's.
	Statements []string
	Prepared   []Statement // statements it prepared (Parse; "": the unnamed one)
	Portals    []Statement // portals it bound (Bind; "": the unnamed one): a later Execute may run one
	Closed     []string    // named statements it closed (Close)
	Cut        bool        // the bytes end inside a message: Query may be cut short
	// Tail is how many bytes at the end are a message cut short, from its
	// start (0: none): a later part of the round trip's bytes completes it
	// (a pipeline's request is captured in parts). TailAfter is the number
	// of Statements before it.
	Tail, TailAfter int
}

// Statement is a named prepared statement, or a named portal.
type Statement struct{ Name, Text string }

// Known finds the text of a named statement (kind 'S') or portal ('P')
// that an earlier round trip prepared or bound.
type Known func(kind byte, name string) (string, bool)

// ParseRoundTrip reads the frontend messages of a round trip. A Bind or
// Execute that names a statement or portal of an earlier round trip finds
// its text with known.
func ParseRoundTrip(b []byte, known Known) RoundTrip {
	var rt RoundTrip
	var parsed string              // the first Parse's text
	stmts := map[string]string{}   // this round trip's statements ("": the unnamed one)
	portals := map[string]string{} // and portals
	for end := false; len(b) > 0 && !end; {
		if len(b) < 5 {
			rt.Cut, rt.Tail, rt.TailAfter = true, len(b), len(rt.Statements)
			break
		}
		typ, n := b[0], int(binary.BigEndian.Uint32(b[1:5]))
		if n < 4 {
			rt.Cut = true // not a message: the bytes are not what we expect
			break
		}
		body := b[5:]
		if n-4 <= len(body) {
			body, b = body[:n-4], body[n-4:]
		} else {
			rt.Cut, rt.Tail, rt.TailAfter, b = true, len(b), len(rt.Statements), nil
		}
		f := fields(body)
		// A Sync, a simple Query or a FunctionCall ends the round trip;
		// what follows is the next one's, sent ahead (pipelining).
		end = typ == 'S' || typ == 'Q' || typ == 'F'
		switch typ {
		case 'Q':
			text := f.next()
			rt.Query = cmp.Or(rt.Query, text)
			split := sqlnorm.Statements(text)
			if len(split) == 0 {
				split = []string{text} // an empty query: the server answers it, once
			}
			rt.Statements = append(rt.Statements, split...)
		case 'P':
			name, whole := f.whole()
			if !whole {
				break // its name cut short: the part that completes it tells
			}
			text := f.next() // cut short, the start of the text is still the statement's
			parsed = cmp.Or(parsed, text)
			stmts[name] = text
			rt.Prepared = append(rt.Prepared, Statement{name, text})
		case 'B':
			portal, whole := f.whole()
			name, whole2 := f.whole()
			if !whole || !whole2 {
				break // a name cut short would find the wrong statement
			}
			text := lookup(stmts, 'S', name, known)
			portals[portal] = text
			rt.Portals = append(rt.Portals, Statement{portal, text})
			rt.Query = cmp.Or(rt.Query, text)
		case 'E':
			portal, whole := f.whole()
			if !whole {
				break
			}
			text := lookup(portals, 'P', portal, known)
			rt.Statements = append(rt.Statements, text)
			rt.Query = cmp.Or(rt.Query, text)
		case 'F':
			rt.Statements = append(rt.Statements, "-- a function call (fast path)")
		case 'C':
			if kind := f.byte(); kind == 'S' {
				if name := f.next(); name != "" {
					rt.Closed = append(rt.Closed, name)
				}
			}
		}
	}
	rt.Query = cmp.Or(rt.Query, parsed)
	if rt.Query == "" && len(rt.Closed) == 0 {
		rt.Query = "-- a statement that began before the trace" // its first messages were not seen (COPY data, say)
	}
	return rt
}

// Portals is what a round trip's messages do to portals, for the
// statements whose portal was suspended at its row limit: PostgreSQL
// counts such a statement when the portal ends, which a later round trip
// may do (internal/probe/bpf/pgwire.bpf.c).
type Portals struct {
	// Executed names the portal each statement of the round trip ran in,
	// in the order of RoundTrip.Statements ("": the unnamed portal, where
	// a simple Query's statements run too).
	Executed []string
	Closed   []string // portals it closed (Close 'P')
	Unnamed  bool     // it made a new unnamed portal (a Bind of "", a simple Query), dropping the old one
}

// ParsePortals reads the portals of a round trip's frontend messages, as
// ParseRoundTrip reads its statements.
func ParsePortals(b []byte) Portals {
	var p Portals
	for end := false; len(b) >= 5 && !end; {
		typ, n := b[0], int(binary.BigEndian.Uint32(b[1:5]))
		if n < 4 {
			break
		}
		body := b[5:]
		if n-4 > len(body) {
			break // cut short: a name in it may be too
		}
		body, b = body[:n-4], body[n-4:]
		f := fields(body)
		end = typ == 'S' || typ == 'Q' || typ == 'F'
		switch typ {
		case 'Q':
			p.Unnamed = true
			for range max(len(sqlnorm.Statements(f.next())), 1) {
				p.Executed = append(p.Executed, "")
			}
		case 'F':
			p.Executed = append(p.Executed, "")
		case 'B':
			p.Unnamed = p.Unnamed || f.next() == ""
		case 'E':
			p.Executed = append(p.Executed, f.next())
		case 'C':
			if f.byte() == 'P' {
				p.Closed = append(p.Closed, f.next())
			}
		}
	}
	return p
}

// lookup finds a statement's or portal's text: this round trip's, else an
// earlier one's, else says what it is.
func lookup(here map[string]string, kind byte, name string, known Known) string {
	if t, ok := here[name]; ok {
		return t
	}
	if known != nil {
		if t, ok := known(kind, name); ok {
			return t
		}
	}
	what := map[byte]string{'S': "prepared statement", 'P': "portal"}[kind]
	if name == "" {
		return "-- the unnamed " + what + ", from an earlier round trip"
	}
	return fmt.Sprintf("-- %s %s, from before the trace began", what, name)
}

// fields reads the NUL-terminated strings of a message body in turn.
type fields []byte

func (f *fields) next() string {
	i := bytes.IndexByte(*f, 0)
	if i < 0 {
		s := string(*f)
		*f = nil
		return s
	}
	s := string((*f)[:i])
	*f = (*f)[i+1:]
	return s
}

// whole is the next string and whether it was whole (its NUL seen).
func (f *fields) whole() (string, bool) {
	whole := bytes.IndexByte(*f, 0) >= 0
	return f.next(), whole
}

func (f *fields) byte() byte {
	if len(*f) == 0 {
		return 0
	}
	c := (*f)[0]
	*f = (*f)[1:]
	return c
}
