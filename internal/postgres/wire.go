package postgres

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// The frontend half of PostgreSQL's protocol (version 3), as far as
// dbiolat reads it: which statement a round trip ran. The kernel copies
// the first bytes a backend reads in each round trip, from the first
// message to the Sync or simple Query that ends it
// (internal/probe/bpf/wire.bpf.c); this reads them.

// RoundTrip is what the messages of one round trip ran.
type RoundTrip struct {
	// Query is the SQL it ran: a simple Query's text, or the text of the
	// statement its first Bind names; for a round trip that only
	// prepares, the prepared text.
	Query    string
	Prepared []Statement // named statements it prepared (Parse)
	Closed   []string    // named statements it closed (Close)
	Executes int         // simple Queries and Executes (a JDBC batch sends many before one Sync)
	Cut      bool        // the bytes end inside a message: Query may be cut short
}

// Statement is a named prepared statement.
type Statement struct{ Name, Text string }

// ParseRoundTrip reads the frontend messages of a round trip. A Bind that
// names a statement prepared in an earlier round trip finds its text with
// known.
func ParseRoundTrip(b []byte, known func(name string) (string, bool)) RoundTrip {
	var rt RoundTrip
	var unnamed, parsed string // the unnamed statement's text; the first Parse's
	here := map[string]string{}
	for end := false; len(b) > 0 && !end; {
		if len(b) < 5 {
			rt.Cut = true
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
			rt.Cut, b = true, nil
		}
		f := fields(body)
		// A Sync, a simple Query or a FunctionCall ends the round trip;
		// what follows is the next one's, sent ahead (pipelining).
		end = typ == 'S' || typ == 'Q' || typ == 'F'
		switch typ {
		case 'Q':
			rt.Executes++
			if rt.Query == "" {
				rt.Query = f.next()
			}
		case 'P':
			name, text := f.next(), f.next()
			if parsed == "" {
				parsed = text
			}
			if name == "" {
				unnamed = text
			} else {
				here[name] = text
				rt.Prepared = append(rt.Prepared, Statement{name, text})
			}
		case 'B':
			f.next() // the portal
			if name := f.next(); rt.Query == "" {
				rt.Query = statementText(name, unnamed, here, known)
			}
		case 'E', 'F':
			rt.Executes++
		case 'C':
			if kind := f.byte(); kind == 'S' {
				if name := f.next(); name != "" {
					rt.Closed = append(rt.Closed, name)
				}
			}
		}
	}
	if rt.Query == "" {
		rt.Query = parsed
	}
	if rt.Query == "" && len(rt.Closed) == 0 {
		rt.Query = "-- a statement that began before the trace" // its first messages were not seen (COPY data, say)
	}
	return rt
}

func statementText(name, unnamed string, here map[string]string, known func(string) (string, bool)) string {
	if name == "" && unnamed != "" {
		return unnamed
	}
	if t, ok := here[name]; ok {
		return t
	}
	if known != nil {
		if t, ok := known(name); ok {
			return t
		}
	}
	if name == "" {
		return "-- the unnamed statement, prepared in an earlier round trip"
	}
	return fmt.Sprintf("-- prepared statement %s, prepared before the trace began", name)
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

func (f *fields) byte() byte {
	if len(*f) == 0 {
		return 0
	}
	c := (*f)[0]
	*f = (*f)[1:]
	return c
}
