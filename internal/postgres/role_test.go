package postgres

import "testing"

func TestParseTitle(t *testing.T) {
	for _, c := range []struct {
		title string
		want  Process
	}{
		{"/usr/lib/postgresql/15/bin/postgres -D /var/lib/pg", Process{Role: Postmaster}},
		{"postgres: checkpointer ", Process{Role: Checkpointer}},
		{"postgres: 15/main: checkpointer \x00\x00", Process{Role: Checkpointer}},
		{"postgres: 15/main: background writer ", Process{Role: BackgroundWriter}},
		{"postgres: walwriter", Process{Role: WalWriter}},
		{"postgres: autovacuum launcher", Process{Role: AutovacuumLaunch}},
		{"postgres: autovacuum worker bench", Process{Role: AutovacuumWorker}},
		{"postgres: logical replication launcher", Process{Role: LogicalLauncher}},
		{"postgres: parallel worker for PID 4711", Process{Role: ParallelWorker}},
		{"postgres: io worker 0", Process{Role: IOWorker}},
		{"postgres: s18: io worker 2", Process{Role: IOWorker}},
		{"postgres: walsummarizer", Process{Role: WalSummarizer}},
		{"postgres: slotsync worker", Process{Role: SlotsyncWorker}},
		{"postgres: archiver last was 000000010000000000000003", Process{Role: Archiver}},
		{"postgres: startup recovering 000000010000000000000004", Process{Role: Startup}},
		{"postgres: walreceiver streaming 0/3000148", Process{Role: WalReceiver}},
		{"postgres: walsender repl 10.0.0.2(5432) streaming 0/3000060", Process{Role: WalSender, User: "repl"}},
		{"postgres: alice shop [local] idle", Process{Role: ClientBackend, User: "alice", Database: "shop"}},
		{"postgres: 15/main: postgres bench [local] SELECT", Process{Role: ClientBackend, User: "postgres", Database: "bench"}},
		{"postgres: bob app 127.0.0.1(40312) idle in transaction", Process{Role: ClientBackend, User: "bob", Database: "app", ClientAddr: "127.0.0.1", ClientPort: 40312}},
		{"postgres: bob app ::1(5433) SELECT", Process{Role: ClientBackend, User: "bob", Database: "app", ClientAddr: "::1", ClientPort: 5433}},
		{"postgres: weird", Process{Role: Unknown}},
	} {
		if got := ParseTitle(c.title); got != c.want {
			t.Errorf("ParseTitle(%q) = %+v, want %+v", c.title, got, c.want)
		}
	}
}
