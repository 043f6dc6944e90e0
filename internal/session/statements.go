package session

import "github.com/dbiolat/dbiolat/internal/postgres"

// statements holds the named prepared statements of each backend, learned
// from the round trips that prepared them, so that a later Bind that names
// one finds its text. The kernel sends every round trip that prepares a
// named statement, whatever the thresholds.
type statements map[uint32]map[string]string

// maxStatements bounds what one backend's statements may hold; a client
// that prepares more without closing them loses some of the texts
// (their queries then show the statement's name).
const maxStatements = 1000

// roundTrip reads a round trip of backend pid and learns what it prepared
// and closed.
func (st statements) roundTrip(pid uint32, msgs []byte) postgres.RoundTrip {
	known := st[pid]
	rt := postgres.ParseRoundTrip(msgs, func(name string) (string, bool) {
		t, ok := known[name]
		return t, ok
	})
	for _, name := range rt.Closed {
		delete(known, name)
	}
	for _, p := range rt.Prepared {
		if known == nil {
			known = map[string]string{}
			st[pid] = known
		}
		if len(known) >= maxStatements {
			for name := range known {
				delete(known, name)
				break
			}
		}
		known[p.Name] = p.Text
	}
	return rt
}
