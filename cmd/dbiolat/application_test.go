package main

// Who sent each query: the application name PostgreSQL's clients give
// (application_name) as real drivers set it: at connect (psycopg,
// pgJDBC's ApplicationName), by SET in the middle of a session, over TLS,
// and on a session opened before the trace. Each application's queries
// are counted against what it sent, and together against
// pg_stat_statements (which has no application name).

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
)

func TestApplicationNamed(t *testing.T) {
	sideBySide(t)
	port := freePort(t)
	eachVersion(t, map[string]string{"listen_addresses": "127.0.0.1", "port": strconv.Itoa(port)}, func(t *testing.T, c *pgsandbox.Cluster) {
		testApplicationNamed(t, c, port)
	})
}

func testApplicationNamed(t *testing.T, c *pgsandbox.Cluster, port int) {
	python, jars := driverTools(t)
	enableTLS(t, c)
	early := openSessionEnv(t, c, []string{"PGAPPNAME=before the trace"})
	early.run(t, "SELECT 1")
	psql(t, c, "SELECT pg_stat_statements_reset()")

	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
	// HOME: libpq looks for a client certificate there, which the server's
	// user may not read in root's home.
	pyEnv := append(os.Environ(), append(c.Env(), "HOME="+c.SocketDir(), "PGPORT="+strconv.Itoa(port))...)
	runs := []struct {
		args []string // pg_application.py's, or a JDBC URL's application
		sent map[string]int
	}{
		{[]string{"connect", "shop-web", "30"}, map[string]int{"shop-web": 30}},
		{[]string{"set", "shop-batch", "20"}, map[string]int{"shop-batch-before": 20, "shop-batch": 20}},
		{[]string{"tls", "shop-tls", "25"}, map[string]int{"shop-tls": 25}},
		{[]string{"jdbc", "shop-jdbc"}, map[string]int{"shop-jdbc": 20}},
	}
	sent := map[string]int{"before the trace": 3}
	for _, r := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var cmd *exec.Cmd
		if r.args[0] == "jdbc" {
			url := fmt.Sprintf("jdbc:postgresql://127.0.0.1:%d/postgres?user=postgres&ApplicationName=%s", port, r.args[1])
			cmd = exec.CommandContext(ctx, "java", "-cp", jars.pgjdbc, filepath.Join("testdata", "drivers", "PgJdbc.java"), url, "application")
		} else {
			cmd = exec.CommandContext(ctx, python, append([]string{filepath.Join("testdata", "drivers", "pg_application.py")}, r.args...)...)
			cmd.Env = pyEnv
		}
		_, err := cmdrun.Run(cmd, nil, r.args[0])
		cancel()
		if err != nil {
			t.Fatalf("%v: %v", r.args, err)
		}
		for app, n := range r.sent {
			sent[app] += n
		}
	}
	for range 3 {
		early.run(t, "SELECT 7 AS app_probe")
	}
	queries, _, _ := tr.stop(t)

	ours, total := map[string]int{}, 0
	for _, q := range queries {
		switch {
		case strings.Contains(q.Query, "app_probe"):
			ours[q.Application] += q.Statements
			total += q.Statements
		case strings.HasPrefix(q.Query, "SET application_name"):
			// Read as the query ends: the SET names itself by the name it set.
			if q.Application != "shop-batch" {
				t.Errorf("the SET that names shop-batch is named %q", q.Application)
			}
		}
	}
	for _, app := range slices.Sorted(maps.Keys(sent)) {
		n := sent[app]
		t.Logf("%-18s sent %3d, dbiolat %3d", app, n, ours[app])
		if ours[app] != n {
			t.Errorf("application %q: dbiolat counted %d queries, it sent %d", app, ours[app], n)
		}
	}
	if len(ours) != len(sent) {
		t.Errorf("queries by application %v, want exactly %v", ours, sent)
	}
	theirs, err := strconv.Atoi(psql(t, c, "SELECT sum(calls) FROM pg_stat_statements WHERE query LIKE '%app_probe%'"))
	if err != nil || theirs != total {
		t.Errorf("pg_stat_statements counted %d (%v), dbiolat %d across applications", theirs, err, total)
	}
}
