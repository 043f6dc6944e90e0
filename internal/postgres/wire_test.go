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
	closeStmt   = msg('C', "S", cstr("P0_1"))
)

func TestParseRoundTrip(t *testing.T) {
	known := map[string]string{"S_7": "DELETE FROM t WHERE id = $1"}
	lookup := func(n string) (string, bool) { s, ok := known[n]; return s, ok }
	for _, c := range []struct {
		name string
		in   []byte
		want RoundTrip
	}{
		{"simple query", simple, RoundTrip{Query: "SELECT 1", Executes: 1}},
		{"simple query, the next one sent ahead", cat(simple, msg('Q', cstr("SELECT 2"))), RoundTrip{Query: "SELECT 1", Executes: 1}},
		{"extended, unnamed statement", cat(parseAnon, bindAnon, describe, execute, sync),
			RoundTrip{Query: "UPDATE t SET v = $1", Executes: 1}},
		{"prepare only", cat(parseNamed, sync), RoundTrip{Query: "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
			Prepared: []Statement{{"P0_1", "SELECT abalance FROM pgbench_accounts WHERE aid = $1"}}}},
		{"prepare and run", cat(parseNamed, bindNamed, execute, sync), RoundTrip{Query: "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
			Prepared: []Statement{{"P0_1", "SELECT abalance FROM pgbench_accounts WHERE aid = $1"}}, Executes: 1}},
		{"run a statement prepared earlier", cat(bindUnknown, execute, sync), RoundTrip{Query: "DELETE FROM t WHERE id = $1", Executes: 1}},
		{"run a statement prepared before the trace", cat(bindNamed, execute, sync),
			RoundTrip{Query: "-- prepared statement P0_1, prepared before the trace began", Executes: 1}},
		{"a batch: many executes, one sync", cat(bindUnknown, execute, bindUnknown, execute, bindUnknown, execute, sync),
			RoundTrip{Query: "DELETE FROM t WHERE id = $1", Executes: 3}},
		{"close", cat(closeStmt, sync), RoundTrip{Closed: []string{"P0_1"}}},
		{"cut inside the text", simple[:8], RoundTrip{Query: "SEL", Executes: 1, Cut: true}},
		{"cut inside a header", cat(parseAnon, bindAnon[:3]), RoundTrip{Query: "UPDATE t SET v = $1", Cut: true}},
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

func FuzzParseRoundTrip(f *testing.F) {
	for _, seed := range [][]byte{simple, cat(parseNamed, bindNamed, execute, sync), cat(closeStmt, sync), simple[:7]} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rt := ParseRoundTrip(b, func(string) (string, bool) { return "", false })
		if rt.Executes < 0 || len(rt.Query) > len(b)+80 {
			t.Fatalf("%+v from %d bytes", rt, len(b))
		}
	})
}
