package session

import (
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/mysql"
	"github.com/dbiolat/dbiolat/internal/probe"
)

// A record behind a pooler names the client the kernel told, in place of
// the pooler's own connection the backend's title shows.
func TestPooled(t *testing.T) {
	v4 := [16]uint8{10: 0xff, 11: 0xff, 12: 127, 15: 1}
	v6 := [16]uint8{15: 1}
	for _, tc := range []struct {
		name string
		p    probe.PooledFor
		want model.Query
	}{
		{"direct", probe.PooledFor{}, model.Query{ClientAddr: "10.0.0.9", ClientPort: 6432}},
		{"tcp", probe.PooledFor{Pooler: 42, Client: client(afInet, v4, 5678, 0)},
			model.Query{Via: "pgbouncer pid 42", ClientAddr: "127.0.0.1", ClientPort: 5678}},
		{"tcp6", probe.PooledFor{Pooler: 42, Client: client(afInet6, v6, 5678, 0)},
			model.Query{Via: "pgbouncer pid 42", ClientAddr: "::1", ClientPort: 5678}},
		{"unix", probe.PooledFor{Pooler: 42, Client: client(afUnix, [16]uint8{}, 0, 99)},
			model.Query{Via: "pgbouncer pid 42", ClientPID: 99}},
		{"unknown", probe.PooledFor{Pooler: 42}, model.Query{Via: "pgbouncer pid 42"}},
		{"router", probe.PooledFor{Pooler: 43, Client: client(afInet, v4, 5678, 0)},
			model.Query{Via: "mysqlrouter pid 43", ClientAddr: "127.0.0.1", ClientPort: 5678}},
		{"gone", probe.PooledFor{Pooler: 44}, model.Query{Via: "pooler pid 44"}}, // its process gone before its record was read
	} {
		s := &Session{poolers: map[int]followedPooler{42: {exe: "pgbouncer"}, 43: {exe: "mysqlrouter"}}}
		q := model.Query{ClientAddr: "10.0.0.9", ClientPort: 6432} // the pooler's, from the title
		s.pooled(&q, &tc.p)
		if q.Via != tc.want.Via || q.ClientAddr != tc.want.ClientAddr || q.ClientPort != tc.want.ClientPort || q.ClientPID != tc.want.ClientPID {
			t.Errorf("%s: via %q client %q:%d pid %d, want %+v", tc.name, q.Via, q.ClientAddr, q.ClientPort, q.ClientPID, tc.want)
		}
	}
}

func client(family uint16, addr [16]uint8, port uint16, pid uint32) (c probe.ClientEnd) {
	c.Family, c.Addr, c.Port, c.Pid = family, addr, port, pid
	return c
}

// Behind MySQL Router ending TLS, a connection says the client it is for
// (its handshake's or last COM_CHANGE_USER's attributes): a query of that
// client has its application, one of another client (the switch not seen)
// none, rather than another's.
func TestRoutedApplication(t *testing.T) {
	told := &mysqlConn{}
	identified(told, "app", "shop", map[string]string{mysql.ProgramName: "app-a", mysql.RoutedClientIP: "127.0.0.1", mysql.RoutedClientPort: "5000"})
	passed := &mysqlConn{}
	identified(passed, "app", "shop", map[string]string{mysql.ProgramName: "app-p"}) // TLS passed through: the client's own handshake
	switched := &mysqlConn{}
	identified(switched, "app", "shop", map[string]string{mysql.ProgramName: "app-a", mysql.RoutedClientIP: "127.0.0.1", mysql.RoutedClientPort: "5000"})
	identified(switched, "app", "shop", map[string]string{mysql.ProgramName: "app-b", mysql.RoutedClientIP: "127.0.0.1", mysql.RoutedClientPort: "5001"})
	for _, tc := range []struct {
		name string
		c    *mysqlConn
		addr string
		port int
		want string
	}{
		{"its client", told, "127.0.0.1", 5000, "app-a"},
		{"another client", told, "127.0.0.1", 5001, ""},
		{"the Router's own statement", told, "", 0, ""},
		{"passed through", passed, "127.0.0.1", 6000, "app-p"},
		{"handed to the next client", switched, "127.0.0.1", 5001, "app-b"},
	} {
		q := &model.Query{ClientAddr: tc.addr, ClientPort: tc.port}
		if got := routedApplication(tc.c, q); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
