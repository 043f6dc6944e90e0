package postgres

import (
	"encoding/binary"
	"reflect"
	"testing"
)

// msg builds one frontend message: its type, length and body.
func msg(typ byte, parts ...string) []byte {
	var body []byte
	for _, p := range parts {
		body = append(body, p...)
	}
	b := []byte{typ}
	b = binary.BigEndian.AppendUint32(b, uint32(4+len(body)))
	return append(b, body...)
}

func cstr(s string) string { return s + "\x00" }

func cat(ms ...[]byte) []byte {
	var b []byte
	for _, m := range ms {
		b = append(b, m...)
	}
	return b
}

// What libpq, pgbench, JDBC and pgx send, message by message.
var (
	simple      = msg('Q', cstr("SELECT 1"))
	parseNamed  = msg('P', cstr("P0_1"), cstr("SELECT abalance FROM pgbench_accounts WHERE aid = $1"), "\x00\x00")
	parseAnon   = msg('P', cstr(""), cstr("UPDATE t SET v = $1"), "\x00\x00")
	bindNamed   = msg('B', cstr(""), cstr("P0_1"), "\x00\x00\x00\x01\x00\x00\x00\x0212\x00\x00")
	bindAnon    = msg('B', cstr(""), cstr(""), "\x00\x00\x00\x00\x00\x00")
	bindUnknown = msg('B', cstr(""), cstr("S_7"), "\x00\x00\x00\x00\x00\x00")
	describe    = msg('D', "P", cstr(""))
	execute     = msg('E', cstr(""), "\x00\x00\x00\x00")
	sync        = msg('S')
	bindPortal  = msg('B', cstr("C_2"), cstr("S_7"), "\x00\x00\x00\x00\x00\x00")
	execute100  = msg('E', cstr("C_2"), "\x00\x00\x00\x64") // a fetch size of 100: the portal may be suspended
	closeStmt   = msg('C', "S", cstr("P0_1"))
)

func TestParseRoundTrip(t *testing.T) {
	known := map[string]string{"SS_7": "DELETE FROM t WHERE id = $1", "PC_1": "SELECT id FROM big"}
	lookup := func(kind byte, n string) (string, bool) { s, ok := known[string(kind)+n]; return s, ok }
	const (
		balance = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
		update  = "UPDATE t SET v = $1"
		del     = "DELETE FROM t WHERE id = $1"
	)
	for _, c := range []struct {
		name string
		in   []byte
		want RoundTrip
	}{
		{"simple query", simple, RoundTrip{Query: "SELECT 1", Statements: []string{"SELECT 1"}}},
		{"simple query, the next one sent ahead", cat(simple, msg('Q', cstr("SELECT 2"))),
			RoundTrip{Query: "SELECT 1", Statements: []string{"SELECT 1"}}},
		{"simple query of three statements", msg('Q', cstr("INSERT INTO t VALUES (';'); SELECT 1 /* ; */;\n;UPDATE t SET v = 2;")),
			RoundTrip{Query: "INSERT INTO t VALUES (';'); SELECT 1 /* ; */;\n;UPDATE t SET v = 2;",
				Statements: []string{"INSERT INTO t VALUES (';')", "SELECT 1 /* ; */", "UPDATE t SET v = 2"}}},
		{"empty query", msg('Q', cstr(" ")), RoundTrip{Query: " ", Statements: []string{" "}}},
		{"extended, unnamed statement", cat(parseAnon, bindAnon, describe, execute, sync),
			RoundTrip{Query: update, Statements: []string{update}, Prepared: []Statement{{"", update}}, Portals: []Statement{{"", update}}}},
		{"prepare only", cat(parseNamed, sync), RoundTrip{Query: balance, Prepared: []Statement{{"P0_1", balance}}}},
		{"prepare and run", cat(parseNamed, bindNamed, execute, sync),
			RoundTrip{Query: balance, Statements: []string{balance}, Prepared: []Statement{{"P0_1", balance}}, Portals: []Statement{{"", balance}}}},
		{"run a statement prepared earlier", cat(bindUnknown, execute, sync), RoundTrip{Query: del, Statements: []string{del}, Portals: []Statement{{"", del}}}},
		{"run a statement prepared before the trace", cat(bindNamed, execute, sync),
			RoundTrip{Query: "-- prepared statement P0_1, from before the trace began",
				Statements: []string{"-- prepared statement P0_1, from before the trace began"},
				Portals:    []Statement{{"", "-- prepared statement P0_1, from before the trace began"}}}},
		{"a batch: many executes, one sync", cat(bindUnknown, execute, parseAnon, bindAnon, execute, bindUnknown, execute, sync),
			RoundTrip{Query: del, Statements: []string{del, update, del}, Prepared: []Statement{{"", update}},
				Portals: []Statement{{"", del}, {"", update}, {"", del}}}},
		{"a named portal, suspended, resumed later", cat(bindPortal, execute100, sync),
			RoundTrip{Query: del, Statements: []string{del}, Portals: []Statement{{"C_2", del}}}},
		{"a portal bound earlier, resumed", cat(msg('E', cstr("C_1"), "\x00\x00\x00\x64"), sync),
			RoundTrip{Query: "SELECT id FROM big", Statements: []string{"SELECT id FROM big"}}},
		{"close", cat(closeStmt, sync), RoundTrip{Closed: []string{"P0_1"}}},
		{"cut inside the text", simple[:8], RoundTrip{Query: "SEL", Statements: []string{"SEL"}, Cut: true, Tail: 8}},
		{"cut inside a header", cat(parseAnon, bindAnon[:3]), RoundTrip{Query: update, Prepared: []Statement{{"", update}}, Cut: true, Tail: 3}},
		{"cut inside a name: not looked up", cat(bindUnknown, execute, bindUnknown[:8]),
			RoundTrip{Query: del, Statements: []string{del}, Portals: []Statement{{"", del}}, Cut: true, Tail: 8, TailAfter: 1}},
		{"cut after the names: a long parameter", cat(bindUnknown[:len(bindUnknown)-2]),
			RoundTrip{Query: del, Portals: []Statement{{"", del}}, Cut: true, Tail: len(bindUnknown) - 2}},
		{"an execute cut inside its portal's name", cat(bindPortal, execute100[:7]),
			RoundTrip{Query: del, Portals: []Statement{{"C_2", del}}, Cut: true, Tail: 7}},
		{"not a message", []byte{'Q', 0, 0, 0, 1}, RoundTrip{Query: "-- a statement that began before the trace", Cut: true}},
		{"the middle of a COPY", cat(msg('d', "1\tx\n"), msg('c')), RoundTrip{Query: "-- a statement that began before the trace"}},
		{"nothing", nil, RoundTrip{Query: "-- a statement that began before the trace"}},
	} {
		got := ParseRoundTrip(c.in, lookup)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestParsePortals(t *testing.T) {
	closePortal := msg('C', "P", cstr("C_1"))
	for _, c := range []struct {
		name string
		in   []byte
		want Portals
	}{
		{"one-row fetch, unnamed portal", cat(bindAnon, execute, sync), Portals{Executed: []string{""}, Unnamed: true}},
		{"a named portal, bound and run", cat(bindPortal, execute100, sync), Portals{Executed: []string{"C_2"}}},
		{"a portal resumed", cat(msg('E', cstr("C_1"), "\x00\x00\x00\x64"), sync), Portals{Executed: []string{"C_1"}}},
		{"a portal closed, the next one run", cat(closePortal, bindPortal, execute100, sync),
			Portals{Executed: []string{"C_2"}, Closed: []string{"C_1"}}},
		{"a statement closed is no portal", cat(closeStmt, sync), Portals{}},
		{"a simple Query of two statements", msg('Q', cstr("COMMIT; SELECT 1")), Portals{Executed: []string{"", ""}, Unnamed: true}},
		{"the next round trip's messages are not its own", cat(sync, closePortal), Portals{}},
		{"cut", cat(bindPortal, execute100[:7]), Portals{}},
	} {
		if got := ParsePortals(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func FuzzParseRoundTrip(f *testing.F) {
	for _, seed := range [][]byte{simple, cat(parseNamed, bindNamed, execute, sync), cat(closeStmt, sync), simple[:7]} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rt := ParseRoundTrip(b, func(byte, string) (string, bool) { return "", false })
		if len(rt.Statements) > len(b) || len(rt.Query) > len(b)+80 {
			t.Fatalf("%+v from %d bytes", rt, len(b))
		}
		if p := ParsePortals(b); len(p.Executed)+len(p.Closed) > len(b) {
			t.Fatalf("%+v from %d bytes", p, len(b))
		}
	})
}
