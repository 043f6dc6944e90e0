package main

// MySQL 9.7 behind MySQL Router 9.7 (both from the mysql root, each in a
// container of its own, as in a pod): each query names the client the
// Router forwarded it for (its address and port, its program_name), not
// the Router's own connection to the server, as behind pgbouncer. The
// clients are PyMySQL's, each under a program_name, over TLS to the
// Router; what they really were comes from the clients themselves (their
// own ports) and from the server (its statement digests, and the client
// port a Router ending TLS tells it).

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/sandbox"
	"github.com/dbiolat/dbiolat/internal/sidroot"
)

// The Router's clients, each running as many statements.
const (
	routerClients    = 3
	routedStatements = 20
)

// TestMySQLRouterClientsNamed runs the Router each way it treats TLS:
// passed through (each client a server connection of its own, TLS between
// the client and the server, read at the server's OpenSSL), ended at the
// Router (which opens its own TLS connection for each client, adding the
// client's address to its attributes), and ended with connection sharing
// (clients taking turns on the server connections of the Router's pool).
func TestMySQLRouterClientsNamed(t *testing.T) {
	sideBySide(t)
	python, _ := driverTools(t)
	m, _ := startSidMySQL(t, "mysql", sidroot.Container)
	for _, mode := range []sidroot.RouterMode{sidroot.RouterPassthrough, sidroot.RouterTLS, sidroot.RouterSharing} {
		t.Run(mode.String(), func(t *testing.T) { checkRoutedClients(t, python, m, mode) })
	}
}

// routerClient is what a client of the Router says of itself.
type routerClient struct {
	name        string
	port        int            // its own port: the Router's peer
	ranOn       map[string]int // the server connections its statements ran on
	serverKnows string         // the _client_port the server was told for its last connection ("-": none)
}

func checkRoutedClients(t *testing.T, python string, m *sidroot.MySQL, mode sidroot.RouterMode) {
	sql := sidSQL(t, m)
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	r, err := sidroot.StartRouter(m, sidroot.Container, mode, port, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the Router said:\n%s", r.Output())
		}
		r.Stop()
	})
	sql("TRUNCATE performance_schema.events_statements_summary_by_digest")
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", strconv.Itoa(m.PID()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := cmdrun.Run(exec.CommandContext(ctx, python, filepath.Join("testdata", "drivers", "my_router.py"),
		fmt.Sprintf("127.0.0.1:%d", port), sidroot.MySQLUser, strconv.Itoa(routerClients), strconv.Itoa(routedStatements)), nil, "my_router.py")
	if err != nil {
		t.Fatal(err)
	}
	queries, _, sum := tr.stop(t)

	var clients []routerClient
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("my_router.py said %q", line)
		}
		c := routerClient{name: f[0], port: atoi(f[1]), ranOn: map[string]int{}, serverKnows: f[3]}
		for _, id := range strings.Split(f[2], ",") {
			c.ranOn[id]++
		}
		clients = append(clients, c)
	}
	theirs := map[string]int{}
	for _, line := range strings.Split(sql("SELECT COUNT_STAR, DIGEST_TEXT FROM performance_schema.events_statements_summary_by_digest "+
		`WHERE DIGEST_TEXT LIKE '%router\_%'`), "\n") {
		calls, text, _ := strings.Cut(line, "\t")
		if k := regexp.MustCompile(`\brouter_\d+\b`).FindString(text); k != "" {
			theirs[k] += atoi(calls)
		}
	}
	via := fmt.Sprintf("mysqlrouter pid %d", r.PID())
	shared := map[string]int{} // server connection: clients it served
	for k, c := range clients {
		alias := fmt.Sprintf("router_%d", k)
		re := regexp.MustCompile(`\b` + alias + `\b`)
		ours, apps := 0, map[string]int{}
		for _, q := range queries {
			if !re.MatchString(q.Query) {
				continue
			}
			ours += q.Statements
			apps[q.Application]++
			if q.Via != via || q.ClientAddr != "127.0.0.1" || q.ClientPort != c.port {
				t.Errorf("%s's %q: via %q from %s:%d, want via %q from 127.0.0.1:%d", c.name, q.Query, q.Via, q.ClientAddr, q.ClientPort, via, c.port)
			}
			// Sharing, a client's statement may run on a connection the
			// Router opened for another: it says whose it is now by a
			// COM_CHANGE_USER with its client's attributes.
			if q.Application != c.name {
				t.Errorf("%s's %q names application %q", c.name, q.Query, q.Application)
			}
		}
		t.Logf("%s from port %d: the server counted %d statements, dbiolat %d; server connections %v; the server was told port %s; applications %v",
			c.name, c.port, theirs[alias], ours, c.ranOn, c.serverKnows, apps)
		if ours != routedStatements || theirs[alias] != routedStatements {
			t.Errorf("%s ran %d statements: the server counted %d, dbiolat %d", c.name, routedStatements, theirs[alias], ours)
		}
		// Ending TLS, the Router tells the server its client's port: the
		// client's own, as dbiolat names it.
		if mode == sidroot.RouterTLS && c.serverKnows != strconv.Itoa(c.port) {
			t.Errorf("%s: the server was told client port %s, the client's is %d", c.name, c.serverKnows, c.port)
		}
		for id := range c.ranOn {
			shared[id]++
		}
	}
	servedMany := 0
	for _, n := range shared {
		if n > 1 {
			servedMany++
		}
	}
	// Only sharing puts two clients on one server connection.
	if (servedMany > 0) != (mode == sidroot.RouterSharing) {
		t.Errorf("%d server connections served several clients (%v)", servedMany, shared)
	}
	own := 0
	for _, q := range queries {
		if q.Via == via && q.ClientAddr == "" {
			own++
		}
	}
	t.Logf("the Router's own statements no client was known for: %d of %d", own, len(queries))
	checkNoWarning(t, tr.stderr.String())
	checkNoWireLoss(t, sum)
}
