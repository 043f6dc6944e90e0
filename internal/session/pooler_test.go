package session

import (
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
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
	} {
		q := model.Query{ClientAddr: "10.0.0.9", ClientPort: 6432} // the pooler's, from the title
		pooled(&q, &tc.p)
		if q.Via != tc.want.Via || q.ClientAddr != tc.want.ClientAddr || q.ClientPort != tc.want.ClientPort || q.ClientPID != tc.want.ClientPID {
			t.Errorf("%s: via %q client %q:%d pid %d, want %+v", tc.name, q.Via, q.ClientAddr, q.ClientPort, q.ClientPID, tc.want)
		}
	}
}

func client(family uint16, addr [16]uint8, port uint16, pid uint32) (c probe.ClientEnd) {
	c.Family, c.Addr, c.Port, c.Pid = family, addr, port, pid
	return c
}
