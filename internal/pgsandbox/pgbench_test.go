package pgsandbox

import "testing"

// Real pgbench 15 output (Debian 15.18), captured from sandbox runs.
const (
	pgbenchT = `pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 1
query mode: simple
number of clients: 2
number of threads: 1
maximum number of tries: 1
number of transactions per client: 500
number of transactions actually processed: 1000/1000
number of failed transactions: 0 (0.000%)
latency average = 2.440 ms
initial connection time = 21.182 ms
tps = 819.720508 (without initial connection time)
`
	pgbenchDuration = `pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 1
query mode: simple
number of clients: 4
number of threads: 2
maximum number of tries: 1
duration: 2 s
number of transactions actually processed: 2526
number of failed transactions: 0 (0.000%)
latency average = 3.164 ms
initial connection time = 8.634 ms
tps = 1264.089013 (without initial connection time)
`
	// Serialization failures: REPEATABLE READ updates of 5 rows by 8 clients.
	pgbenchFailures = `pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: /tmp/pgb_script.sql
scaling factor: 1
query mode: simple
number of clients: 8
number of threads: 2
maximum number of tries: 1
number of transactions per client: 100
number of transactions actually processed: 398/800
number of failed transactions: 402 (50.250%)
latency average = 2.337 ms (including failures)
initial connection time = 10.772 ms
tps = 1703.351494 (without initial connection time)
`
	// pgbench 13 and older print two tps lines.
	pgbench13 = `number of transactions actually processed: 10/10
latency average = 1.000 ms
tps = 900.5 (including connections establishing)
tps = 1000.5 (excluding connections establishing)
`
)

func TestParsePgbench(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		want PgbenchResult
	}{
		{"-t", pgbenchT, PgbenchResult{TPS: 819.720508, Transactions: 1000, LatencyAvgMs: 2.440}},
		{"-T", pgbenchDuration, PgbenchResult{TPS: 1264.089013, Transactions: 2526, LatencyAvgMs: 3.164}},
		{"failures", pgbenchFailures, PgbenchResult{TPS: 1703.351494, Transactions: 398, Failed: 402, LatencyAvgMs: 2.337}},
		{"pg13", pgbench13, PgbenchResult{TPS: 1000.5, Transactions: 10, LatencyAvgMs: 1}},
	} {
		got, err := ParsePgbench(tc.out)
		if err != nil || got != tc.want {
			t.Errorf("%s: ParsePgbench = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "pgbench: error: connection to server failed\n", "number of transactions actually processed: x/10\ntps = 1\n"} {
		if _, err := ParsePgbench(bad); err == nil {
			t.Errorf("ParsePgbench(%q) succeeded", bad)
		}
	}
}
