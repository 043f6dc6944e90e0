package session

import "github.com/dbiolat/dbiolat/internal/postgres"

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
