package main

// Which queries are seen, and how: every statement once, whatever the
// protocol, the connection's encryption or the source of the boundaries
// (client protocol or USDT), with its shared-buffer counts on request.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
)

// Every statement pgbench runs is reported exactly once, in agreement with
// pgbench's own count and pg_stat_statements, whichever protocol the
// client speaks: simple queries, the extended protocol with unnamed
// statements, or named prepared statements; on every version; and with
// --usdt where the build has the probes, which fire for simple queries only.
func TestPgbenchStatementsReportedOnce(t *testing.T) {
	sideBySide(t)
	eachVersionAtOnce(t, nil, testPgbenchStatementsReportedOnce)
}

func testPgbenchStatementsReportedOnce(t *testing.T, c *pgsandbox.Cluster) {
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		protocol string
		flags    []string
	}{{"simple", nil}, {"extended", nil}, {"prepared", nil}}
	if hasUSDT(c) {
		cases = append(cases, struct {
			protocol string
			flags    []string
		}{"simple", []string{"--usdt"}})
	}
	for _, tc := range cases {
		t.Run(strings.Join(append([]string{tc.protocol}, tc.flags...), " "), func(t *testing.T) {
			psql(t, c, "SELECT pg_stat_statements_reset()")
			args := append([]string{"slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID())}, tc.flags...)
			tr := startTrace(t, args...)
			out, err := c.Pgbench(ctx, "postgres", "-n", "-M", tc.protocol, "-c", "2", "-t", "300")
			if err != nil {
				t.Fatal(err)
			}
			res, err := pgsandbox.ParsePgbench(out)
			if err != nil {
				t.Fatal(err)
			}
			queries, _, sum := tr.stop(t)
			checkPgbenchStatements(t, c, queries, res.Transactions, tc.protocol == "prepared")
			if sum.Drops.Of("wire_unseen") != 0 {
				t.Errorf("%d round trips began unseen", sum.Drops.Of("wire_unseen"))
			}
		})
	}
}

// checkPgbenchStatements checks the records of a TPC-B-like run: each
// statement once per transaction, as pg_stat_statements counted it, under
// one fingerprint, with the literals replaced. With prepared statements,
// pg_stat_statements counts BEGIN and END once per connection (2 here),
// not once per execution, so those two are checked against pgbench only.
func checkPgbenchStatements(t *testing.T, c *pgsandbox.Cluster, queries []model.Query, transactions int64, prepared bool) {
	t.Helper()
	pss := func(prefix string) int {
		n, err := strconv.Atoi(psql(t, c, fmt.Sprintf("SELECT coalesce(sum(calls),0) FROM pg_stat_statements WHERE query LIKE '%s%%'", prefix)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, stmt := range []string{"UPDATE pgbench_accounts", "UPDATE pgbench_tellers", "SELECT abalance", "INSERT INTO pgbench_history", "BEGIN", "END"} {
		ours := len(matching(queries, stmt))
		theirs := pss(stmt)
		t.Logf("%-28s dbiolat %d, pg_stat_statements %d, pgbench transactions %d", stmt, ours, theirs, transactions)
		utility := stmt == "BEGIN" || stmt == "END"
		if int64(ours) != transactions || ours != theirs && !(prepared && utility) {
			t.Errorf("%s: dbiolat reported %d, pgbench ran %d, pg_stat_statements counted %d", stmt, ours, transactions, theirs)
		}
	}
	fps := map[string]bool{}
	for _, q := range matching(queries, "UPDATE pgbench_accounts") {
		fps[q.Fingerprint] = true
		if q.Database != "postgres" || q.Role != "client backend" {
			t.Errorf("query attributed to database %q role %q", q.Database, q.Role)
		}
		if literalDigit.MatchString(q.Query) {
			t.Errorf("literal left in normalized query %q", q.Query)
		}
		if q.CPUNs == 0 || q.Accounted() > q.QueryNs+q.QueryNs/20 {
			t.Errorf("the waterfall does not add up: %d ns accounted of %d", q.Accounted(), q.QueryNs)
		}
	}
	if len(fps) != 1 {
		t.Errorf("UPDATE pgbench_accounts has %d fingerprints, want 1", len(fps))
	}
}

// TLS connections are read in plaintext at the server's OpenSSL (3 in
// Debian's 15, the 1.1 bundled with 16 to 18): every statement of a pgbench
// run over TLS (sslmode=require), simple and extended protocol, is
// reported once, as pg_stat_statements counted it; a TLS session opened
// before the trace is read from its next query; the summary counts them.
// With --usdt, whose probes fire in the backend, the same queries are seen.
func TestTLSConnectionsAreTraced(t *testing.T) {
	sideBySide(t)
	port := freePort(t)
	eachVersion(t, map[string]string{"listen_addresses": "127.0.0.1", "port": fmt.Sprint(port)}, testTLSConnectionsAreTraced)
}

func testTLSConnectionsAreTraced(t *testing.T, c *pgsandbox.Cluster) {
	enableTLS(t, c)
	ctx := context.Background()
	// HOME: libpq looks for a client certificate there, which the server's
	// user may not read in root's home.
	tlsEnv := []string{"PGSSLMODE=require", "HOME=" + c.SocketDir()}
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	early := openSessionEnv(t, c, append([]string{"PGHOST=127.0.0.1"}, tlsEnv...))
	if ssl := early.run(t, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"); ssl != "t" {
		t.Fatalf("the session is not over TLS: ssl %q", ssl)
	}
	for _, protocol := range []string{"simple", "extended"} {
		t.Run(protocol, func(t *testing.T) {
			psql(t, c, "SELECT pg_stat_statements_reset()")
			tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
			bench := c.PgbenchCmd(ctx, "postgres", "-h", "127.0.0.1", "-n", "-M", protocol, "-c", "2", "-t", "100")
			bench.Env = append(bench.Env, tlsEnv...)
			out, err := bench.Output()
			if err != nil {
				t.Fatalf("pgbench over TLS: %v", err)
			}
			res, err := pgsandbox.ParsePgbench(string(out))
			if err != nil {
				t.Fatal(err)
			}
			early.run(t, "SELECT 4242 AS from_before_the_trace")
			psql(t, c, "SELECT 4343 AS over_unix_socket")
			queries, _, sum := tr.stop(t)
			t.Logf("over TLS: %d TLS connections read at OpenSSL, %d unread", sum.Drops.Of("wire_tls"), sum.Drops.Of("wire_encrypted"))
			checkPgbenchStatements(t, c, queries, res.Transactions, false)
			if len(matching(queries, "SELECT $1 AS from_before_the_trace")) != 1 || len(matching(queries, "SELECT $1 AS over_unix_socket")) != 1 {
				t.Errorf("the TLS session older than the trace, or the unix socket's query, was not seen once")
			}
			// pgbench's 3 (one finds the scale, then its 2 clients) and the session's.
			if sum.Drops.Of("wire_tls") != 4 || sum.Drops.Of("wire_encrypted") != 0 {
				t.Errorf("%d TLS connections read at OpenSSL (want 4), %d encrypted unread (want 0)",
					sum.Drops.Of("wire_tls"), sum.Drops.Of("wire_encrypted"))
			}
		})
	}
	if hasUSDT(c) {
		tr := startTrace(t, "slowlog", "--usdt", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
		early.run(t, "SELECT 4444 AS with_usdt")
		queries, _, _ := tr.stop(t)
		if len(matching(queries, "SELECT $1 AS with_usdt")) != 1 {
			t.Errorf("--usdt did not see the query over TLS: %+v", queries)
		}
	}
}

// enableTLS gives the server a self-signed certificate and turns ssl on.
func enableTLS(t *testing.T, c *pgsandbox.Cluster) {
	t.Helper()
	if err := c.EnableTLS(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// --buffers: the query's shared-buffer hits and reads equal what
// pg_stat_statements counted for it, once the session's catalog caches are
// warm (parsing a session's first query reads catalog buffers that no
// statement counts).
func TestSharedBuffersMatchPgStatStatements(t *testing.T) {
	sideBySide(t)
	c := startPG(t, map[string]string{"pg_stat_statements.track_planning": "on"})
	makeBigTable(t, c)
	const scan = "SELECT count(*) FROM big WHERE id >= 0"
	tr := startTrace(t, "slowlog", "--fs", "--json", "--buffers", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
	// The first run warms the session's catalog caches; only the second counts.
	psql(t, c, scan+"; SELECT pg_stat_statements_reset(); "+scan)
	qs, _, _ := tr.stop(t)
	checkBoxesAddUp(t, qs)
	q := only(t, qs, "SELECT count(*) FROM big", 2)[1]
	row := strings.Split(psql(t, c, "SELECT shared_blks_hit, shared_blks_read FROM pg_stat_statements WHERE query LIKE 'SELECT count(*) FROM big%'"), "|")
	if len(row) != 2 {
		t.Fatalf("pg_stat_statements row: %q", row)
	}
	hits, _ := strconv.ParseUint(row[0], 10, 64)
	reads, _ := strconv.ParseUint(row[1], 10, 64)
	t.Logf("pg_stat_statements: %d hits, %d reads; dbiolat: %d hits, %d reads", hits, reads, q.SharedHit, q.SharedRead)
	if reads == 0 || q.SharedRead != reads || q.SharedHit != hits {
		t.Errorf("shared buffers: dbiolat %d hit %d read, pg_stat_statements %d hit %d read", q.SharedHit, q.SharedRead, hits, reads)
	}
}
