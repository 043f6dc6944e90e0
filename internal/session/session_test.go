package session

import (
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/postgres"
	"github.com/dbiolat/dbiolat/internal/probe"
)

// BenchmarkRecord is the user-space cost of one query record from the ring
// buffer to a slow-log line: it bounds how many records per second a
// slowlog can print without falling behind.
func BenchmarkRecord(b *testing.B) {
	s := &Session{procs: map[uint32]proc{42: {role: model.Role(postgres.ClientBackend), user: "u", database: "d"}},
		untraced: &traced{server: &pgServer{}}}
	e := &probe.QueryEvent{StartNs: 1e9, EndNs: 1e9 + 123456, Pid: 42, Tgid: 42}
	e.Acct.Fs[probe.FSRead] = probe.IOAcct{Count: 2, Bytes: 16384, Ns: 20000}
	text := []byte("SELECT abalance FROM pgbench_accounts WHERE aid = 48213;")
	b.ReportAllocs()
	var line []byte
	for i := 0; i < b.N; i++ {
		q := s.query(e, text)
		line = output.AppendSlowLine(line[:0], q)
	}
}
