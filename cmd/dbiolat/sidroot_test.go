package main

// Servers run from the project's Debian sid roots (scripts/sid-root,
// internal/sidroot) the ways users run them: plainly in a chroot, in a
// container with its own namespaces (podman --rootfs, as in a pod), and
// chrooted inside such a container. Their libraries and binaries are
// reached from the host through each (procfs.MappedFile): their TLS
// connections are read at the root's OpenSSL, their USDT probes and wait
// events found in their own binary.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/sandbox"
	"github.com/dbiolat/dbiolat/internal/sidroot"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// sidRoot is a root's directory, built on first use; outside CI a machine
// that cannot build one skips.
func sidRoot(t *testing.T, name string) string {
	t.Helper()
	testenv.NeedRoot(t)
	root, err := sidroot.Root(name)
	if errors.Is(err, sidroot.ErrUnavailable) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// startSidPostgres starts PostgreSQL of a version in the postgresql root,
// the way how says, on a free loopback port, for the test's duration (its
// output logged if the test failed).
func startSidPostgres(t *testing.T, version string, how sidroot.How) (*sidroot.Postgres, int) {
	t.Helper()
	root := sidRoot(t, "postgresql")
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := sidroot.StartPostgres(context.Background(), sidroot.PostgresOptions{Root: root, Version: version, How: how, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the server said:\n%s", p.Output())
		}
		p.Stop()
	})
	return p, port
}

// sidSQL runs statements on a server of a root as its root user, with
// its output; an error fails the test.
func sidSQL(t *testing.T, m *sidroot.MySQL) func(sql string) string {
	ctx := mysqlContext(t)
	return func(sql string) string {
		t.Helper()
		out, err := m.SQL(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// startSidMySQL starts the server of a MySQL-family root (mysql: MySQL
// 9.7, mariadb: MariaDB 11.8), the same way, with settings (--name=value)
// added.
func startSidMySQL(t *testing.T, name string, how sidroot.How, settings ...string) (*sidroot.MySQL, int) {
	t.Helper()
	root := sidRoot(t, name)
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	m, err := sidroot.StartMySQL(context.Background(), root, how, port, nil, settings...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the server said:\n%s", m.Output())
		}
		m.Stop()
	})
	return m, port
}

// PostgreSQL 18 and 19 (Debian's builds, 19 from experimental: USDT, the
// root's OpenSSL 3) in the postgresql root, each way: psycopg over TLS (sslmode=require)
// sends marked statements; slowlog --pid counts each once, as
// pg_stat_statements does, reading the one TLS connection at OpenSSL with
// no warning and no wire_* loss; --usdt, attached by the server's binary,
// sees them as well.
func TestServerInSidRootOverTLS(t *testing.T) {
	sideBySide(t)
	python, _ := driverTools(t)
	for _, version := range []string{"18", "19"} {
		for _, how := range sidroot.Hows {
			t.Run("pg"+version+"/"+how.String(), func(t *testing.T) { checkSidPostgresOverTLS(t, python, version, how) })
		}
	}
}

func checkSidPostgresOverTLS(t *testing.T, python, version string, how sidroot.How) {
	ctx := context.Background()
	p, port := startSidPostgres(t, version, how)
	// n statements from each client over TLS: psycopg's in the
	// extended protocol, psql's as simple Queries (the only ones
	// PostgreSQL's query__start USDT probe marks).
	const n = 40
	mark := "in_" + strings.ReplaceAll(how.String(), "-", "_")
	extended, simple := "SELECT $1::int AS "+mark+"_ext", "SELECT $1 AS "+mark+"_simple"
	sendExtended := func() {
		t.Helper()
		cmd := exec.CommandContext(ctx, python, "-c", psycopgMarked, strconv.Itoa(port), mark+"_ext", strconv.Itoa(n))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("psycopg over TLS: %v\n%s", err, out)
		}
	}
	sendSimple := func() {
		t.Helper()
		var script strings.Builder
		script.WriteString("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid() AND ssl;\n")
		for i := range n {
			fmt.Fprintf(&script, "SELECT %d AS %s_simple;\n", i, mark)
		}
		out, err := p.PsqlTLS(ctx, script.String())
		if err != nil || !strings.HasPrefix(out, "t\n") {
			t.Fatalf("psql over TLS: %v (the session over TLS: %.1q)", err, out)
		}
	}
	calls := func(query string) int {
		t.Helper()
		out, err := p.Psql(ctx, "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query = '"+query+"'")
		c, cerr := strconv.Atoi(out)
		if err != nil || cerr != nil {
			t.Fatalf("reading pg_stat_statements: %v %v", err, cerr)
		}
		return c
	}
	reset := func() {
		t.Helper()
		if _, err := p.Psql(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			t.Fatal(err)
		}
	}

	reset()
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", strconv.Itoa(p.PID()))
	sendExtended()
	sendSimple()
	queries, _, sum := tr.stop(t)
	for _, q := range []string{extended, simple} {
		ours, theirs := len(matching(queries, q)), calls(q)
		t.Logf("PostgreSQL %s %s (pid %d), %q over TLS: pg_stat_statements %d calls, dbiolat %d",
			p.Version, how, p.PID(), q, theirs, ours)
		if ours != n || theirs != n {
			t.Errorf("%d of %q sent over TLS: dbiolat saw %d, pg_stat_statements %d", n, q, ours, theirs)
		}
	}
	t.Logf("wire_tls %d, wire_encrypted %d", sum.Drops.Of("wire_tls"), sum.Drops.Of("wire_encrypted"))
	checkNoWarning(t, tr.stderr.String())
	// psycopg's connection and psql's, read at OpenSSL; none lost.
	if sum.Drops.Of("wire_tls") != 2 {
		t.Errorf("%d TLS connections read at OpenSSL, want psycopg's and psql's: 2", sum.Drops.Of("wire_tls"))
	}
	checkNoWireLoss(t, sum)

	// USDT at the server's binary, as the server runs it.
	reset()
	tr = startTrace(t, "slowlog", "--usdt", "--json", "--min-query", "0", "--pid", strconv.Itoa(p.PID()))
	sendSimple()
	queries, _, _ = tr.stop(t)
	ours, theirs := len(matching(queries, simple)), calls(simple)
	t.Logf("with --usdt, %q: pg_stat_statements %d calls, dbiolat %d", simple, theirs, ours)
	if ours != n || theirs != n {
		t.Errorf("with --usdt, %d of %q sent: dbiolat saw %d, pg_stat_statements %d", n, simple, ours, theirs)
	}
	checkNoWarning(t, tr.stderr.String())
}

// psycopgMarked connects to 127.0.0.1:argv[1] over TLS, checks the
// session is encrypted and runs argv[3] statements marked argv[2].
const psycopgMarked = `
import sys, psycopg
port, mark, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", sslmode="require") as conn:
    ssl = conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()[0]
    if not ssl:
        sys.exit("the session is not over TLS")
    for i in range(n):
        conn.execute("SELECT %s::int AS " + mark, (i,))
`

// checkNoWarning: dbiolat said nothing cannot be read (TLS, wait events).
func checkNoWarning(t *testing.T, stderr string) {
	t.Helper()
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "cannot be read") || strings.Contains(line, "cannot be told") {
			t.Errorf("dbiolat warned: %s", line)
		}
	}
}

// checkNoWireLoss: every wire_* loss counter of the catalog is 0 (the
// harness's stop checks every loss counter too, this names them).
func checkNoWireLoss(t *testing.T, sum model.Summary) {
	t.Helper()
	for _, c := range model.Counters {
		if v := sum.Drops.Of(c.Name); c.Loss && strings.HasPrefix(c.Name, "wire_") && v != 0 {
			t.Errorf("%s %d, want 0", c.Name, v)
		}
	}
}

// MySQL 9.7 (Oracle's, from sid; TLS by default with the certificates it
// makes, through the root's OpenSSL 3) and MariaDB 11.8 (TLS by default
// since 11.4) in their roots, each way: the client over TLS sends marked
// statements; slowlog --pid counts each once, as the server's statement
// digests do, reading the connection at OpenSSL with no warning and no
// wire_* loss.
func TestMySQLInSidRootOverTLS(t *testing.T) {
	sideBySide(t)
	for _, server := range sidMySQLs {
		for _, how := range sidroot.Hows {
			t.Run(server.name+"/"+how.String(), func(t *testing.T) {
				ctx := context.Background()
				m, _ := startSidMySQL(t, server.root, how, server.settings...)
				sql := sidSQL(t, m)
				const n = 40
				mark := "in_" + strings.ReplaceAll(how.String(), "-", "_")
				var script strings.Builder
				for i := range n {
					fmt.Fprintf(&script, "SELECT %d AS %s;\n", i, mark)
				}
				sql("TRUNCATE performance_schema.events_statements_summary_by_digest")
				tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", strconv.Itoa(m.PID()))
				if _, err := m.SQLTLS(ctx, "SHOW SESSION STATUS LIKE 'Ssl_version';\n"+script.String()); err != nil {
					t.Fatalf("the client over TLS: %v", err)
				}
				queries, _, sum := tr.stop(t)
				ours := len(matching(queries, "SELECT ? AS "+mark))
				theirs, err := strconv.Atoi(sql("SELECT COALESCE(SUM(COUNT_STAR), 0) FROM performance_schema.events_statements_summary_by_digest WHERE DIGEST_TEXT LIKE '%" + mark + "%'"))
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s %s (pid %d) over TLS: the server's digests %d, dbiolat %d; wire_tls %d, wire_encrypted %d",
					server.name, how, m.PID(), theirs, ours, sum.Drops.Of("wire_tls"), sum.Drops.Of("wire_encrypted"))
				if ours != n || theirs != n {
					t.Errorf("%d statements sent over TLS: dbiolat saw %d, the server's digests %d", n, ours, theirs)
				}
				checkNoWarning(t, tr.stderr.String())
				if sum.Drops.Of("wire_tls") != 1 {
					t.Errorf("%d TLS connections read at OpenSSL, want the client's 1", sum.Drops.Of("wire_tls"))
				}
				checkNoWireLoss(t, sum)
			})
		}
	}
}
