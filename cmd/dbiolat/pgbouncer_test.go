package main

// Queries behind pgbouncer, in session and in transaction pooling: each
// names the client connection pgbouncer forwarded it for (its address
// and port, its application), not pgbouncer's own connection to the
// server. The clients are pgbench's and psycopg's, over TCP to pgbouncer,
// which reaches the server over its unix socket; what they really were
// comes from pgbouncer's log (its logins) and from the clients
// themselves, the counts from pgbench and pg_stat_statements.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
)

func TestPgbouncerClientsNamed(t *testing.T) {
	sideBySide(t)
	port := freePort(t)
	c := startPG(t, map[string]string{"listen_addresses": "127.0.0.1", "port": strconv.Itoa(port)})
	python, _ := driverTools(t)
	if _, err := c.Pgbench(context.Background(), "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts pgsandbox.PgbouncerOptions
	}{
		{"session", pgsandbox.PgbouncerOptions{PoolMode: "session"}},
		{"transaction", pgsandbox.PgbouncerOptions{PoolMode: "transaction"}},
		// The server's end of pgbouncer's connections is a TCP socket, not a unix one.
		{"transaction over TCP", pgsandbox.PgbouncerOptions{PoolMode: "transaction", ServerTCP: true}},
	} {
		t.Run(tc.name, func(t *testing.T) { testPgbouncerClientsNamed(t, c, python, tc.opts) })
	}
}

// pgbouncer's clients: pgbench's, each running as many transactions, and
// psycopg's, each running as many probes under its application name.
const (
	pooledPgbenchClients = 4
	pooledTransactions   = 100
	pooledProbes         = 20
)

var pooledApps = []string{"pooled-a", "pooled-b", "pooled-c"}

// pgbenchStatements are the statements of pgbench's built-in script.
var pgbenchStatements = []string{"BEGIN", "UPDATE pgbench_accounts", "SELECT abalance", "UPDATE pgbench_tellers",
	"UPDATE pgbench_branches", "INSERT INTO pgbench_history", "END"}

func testPgbouncerClientsNamed(t *testing.T, c *pgsandbox.Cluster, python string, opts pgsandbox.PgbouncerOptions) {
	// Two server connections for seven clients: in transaction pooling
	// they take turns on them.
	opts.PoolSize = 2
	pgb := startPgbouncer(t, c, opts)
	psql(t, c, "SELECT pg_stat_statements_reset()")
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))

	appOf := map[int]string{} // a psycopg client's port: its application
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(pooledApps)+1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wg.Go(func() {
		args := append(pgb.ClientArgs(), "-n", "-c", strconv.Itoa(pooledPgbenchClients), "-j", "2", "-t", strconv.Itoa(pooledTransactions))
		if _, err := c.Pgbench(ctx, "postgres", args...); err != nil {
			errs <- err
		}
	})
	for _, app := range pooledApps {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "drivers", "pg_pooled.py"), app, strconv.Itoa(pooledProbes))
			cmd.Env = append(os.Environ(), "PGHOST=127.0.0.1", "PGPORT="+strconv.Itoa(pgb.Port()), "PGUSER=postgres", "PGDATABASE=postgres")
			out, err := cmdrun.Run(cmd, nil, app)
			var port int
			if _, serr := fmt.Sscanf(out, "port %d", &port); err == nil && serr != nil {
				err = fmt.Errorf("%s said %q: %v", app, out, serr)
			}
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			appOf[port] = app
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	queries, _, _ := tr.stop(t)
	logins, err := pgb.Logins()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records, %d client logins at pgbouncer, psycopg's clients %v", len(queries), len(logins), appOf)
	checkPooledClients(t, queries, logins, pgb.PID(), appOf)

	// Each pgbench client ran every statement of its transactions, and
	// together they ran what pg_stat_statements counted.
	var pgbenchPorts []int
	for _, stmt := range pgbenchStatements {
		byClient := clientCounts(matching(queries, stmt))
		total := 0
		for port, n := range byClient {
			total += n
			if n != pooledTransactions {
				t.Errorf("%s: client port %d ran it %d times, pgbench %d", stmt, port, n, pooledTransactions)
			}
		}
		if len(byClient) != pooledPgbenchClients {
			t.Errorf("%s: run by clients %v, want %d pgbench clients", stmt, byClient, pooledPgbenchClients)
		}
		if theirs := pssCalls(t, c, stmt); total != theirs {
			t.Errorf("%s: dbiolat %d across clients, pg_stat_statements %d", stmt, total, theirs)
		}
		pgbenchPorts = slices.Sorted(maps.Keys(byClient))
	}
	t.Logf("pgbench's clients: ports %v", pgbenchPorts)

	// Each psycopg client's probes under its own port and name.
	probes := clientCounts(matching(queries, "SELECT $1::int AS pooled_probe"))
	total := 0
	for port, n := range probes {
		total += n
		if appOf[port] == "" {
			t.Errorf("pooled_probe named client port %d, none of psycopg's %v", port, appOf)
		}
	}
	for port, app := range appOf {
		if probes[port] != pooledProbes {
			t.Errorf("%s (port %d): %d probes, it sent %d", app, port, probes[port], pooledProbes)
		}
	}
	if theirs := pssCalls(t, c, "SELECT $1::int AS pooled_probe"); total != theirs {
		t.Errorf("pooled_probe: dbiolat %d across clients, pg_stat_statements %d", total, theirs)
	}

	// In transaction pooling a backend serves client after client, and
	// names each query's own.
	served := map[int]map[int]bool{}
	for _, q := range queries {
		if q.ClientPort != 0 {
			if served[q.PID] == nil {
				served[q.PID] = map[int]bool{}
			}
			served[q.PID][q.ClientPort] = true
		}
	}
	most := 0
	for pid, clients := range served {
		t.Logf("backend %d served %d clients", pid, len(clients))
		most = max(most, len(clients))
	}
	if opts.PoolMode == "transaction" && most < 2 {
		t.Errorf("no backend served two clients: the test did not pool (backends %v)", served)
	}
}

// checkPooledClients checks every record came through pgbouncer and
// names a client that logged in to it, the application of the client it
// names (what pgbouncer set on the server for that client) being that
// client's. So do the statements pgbouncer sends on its own for a client
// (the SET of its application_name before its requests on a server
// connection, at once or after it waited for one; session pooling's
// DISCARD ALL as it leaves, which leaves no application name).
func checkPooledClients(t *testing.T, queries []model.Query, logins []string, pooler int, appOf map[int]string) {
	t.Helper()
	via := fmt.Sprintf("pgbouncer pid %d", pooler)
	own := map[string]int{}
	for _, q := range queries {
		if q.Via != via {
			t.Errorf("%q: via %q, want %q", q.Query, q.Via, via)
			continue
		}
		if strings.HasPrefix(q.Query, "SET ") || strings.HasPrefix(q.Query, "DISCARD") {
			own[q.Query]++
		}
		if q.ClientAddr == "" {
			t.Errorf("%q (backend %d) names no client", q.Query, q.PID)
			continue
		}
		if addr := fmt.Sprintf("%s:%d", q.ClientAddr, q.ClientPort); !slices.Contains(logins, addr) {
			t.Errorf("%q names client %s, which never logged in to pgbouncer (%v)", q.Query, addr, logins)
		}
		want := cmp.Or(appOf[q.ClientPort], "pgbench")
		if q.Application != want && !strings.HasPrefix(q.Query, "DISCARD") { // the reset leaves no name
			t.Errorf("%q names client port %d, of application %q, but the server ran it for %q", q.Query, q.ClientPort, want, q.Application)
		}
	}
	t.Logf("pgbouncer's own statements, each named by its client: %v", own)
}

// clientCounts counts statements by the client port their records name.
func clientCounts(qs []model.Query) map[int]int {
	out := map[int]int{}
	for _, q := range qs {
		out[q.ClientPort] += q.Statements
	}
	return out
}

// pssCalls is pg_stat_statements' count of the statements beginning with prefix.
func pssCalls(t *testing.T, c *pgsandbox.Cluster, prefix string) int {
	t.Helper()
	q := fmt.Sprintf("SELECT coalesce(sum(calls),0) FROM pg_stat_statements WHERE query LIKE '%s%%'", prefix)
	n, err := strconv.Atoi(psql(t, c, q))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startPgbouncer starts a pgbouncer of the test's own in front of c,
// stopped (its log shown) at the end.
func startPgbouncer(t *testing.T, c *pgsandbox.Cluster, opts pgsandbox.PgbouncerOptions) *pgsandbox.Pgbouncer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := c.StartPgbouncer(ctx, opts)
	if errors.Is(err, pgsandbox.ErrNoPgbouncer) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	return p
}
