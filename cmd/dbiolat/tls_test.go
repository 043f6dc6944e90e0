package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
)

// A connection encrypted with TLS hides its messages: the default mode
// counts it among the drops and reports no query of it, while queries on
// other connections are still seen; --usdt sees its simple queries.
func TestEncryptedConnectionIsCounted(t *testing.T) {
	port := 20000 + os.Getpid()%20000
	c := startPG(t, map[string]string{"listen_addresses": "127.0.0.1", "port": fmt.Sprint(port)})
	enableTLS(t, c)
	overTLS := func() {
		cmd := c.PsqlCmd(context.Background(), "postgres", "-h", "127.0.0.1", "-c", "SELECT 4242 AS over_tls")
		// HOME: libpq looks for a client certificate there, which the
		// server's user may not read in root's home.
		cmd.Env = append(cmd.Env, "PGSSLMODE=require", "HOME="+c.SocketDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("psql over TLS: %v: %s", err, out)
		}
	}
	hasTLSQuery := func(qs []model.Query) bool { return len(matching(qs, "SELECT $1 AS over_tls")) > 0 }

	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
	tr.mayLose = true
	overTLS()
	psql(t, c, "SELECT 4343 AS over_unix_socket")
	queries, _, sum := tr.stop(t)
	t.Logf("default mode: drops %+v, %d queries", sum.Drops, len(queries))
	if sum.Drops.Of("wire_encrypted") != 1 {
		t.Errorf("%d encrypted connections counted, want 1", sum.Drops.Of("wire_encrypted"))
	}
	if hasTLSQuery(queries) || len(matching(queries, "SELECT $1 AS over_unix_socket")) != 1 {
		t.Errorf("want the socket's query and not the TLS one: %+v", queries)
	}

	tr = startTrace(t, "slowlog", "--usdt", "--json", "--min-query", "0", "--pid", fmt.Sprint(c.PostmasterPID()))
	overTLS()
	queries, _, _ = tr.stop(t)
	if !hasTLSQuery(queries) {
		t.Errorf("--usdt did not see the query over TLS: %+v", queries)
	}
}

// enableTLS gives the server a self-signed certificate and turns ssl on.
func enableTLS(t *testing.T, c *pgsandbox.Cluster) {
	t.Helper()
	cert, key := filepath.Join(c.DataDir(), "server.crt"), filepath.Join(c.DataDir(), "server.key")
	if out, err := exec.Command("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
		"-subj", "/CN=localhost", "-keyout", key, "-out", cert).CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v: %s", err, out)
	}
	owner, err := os.Stat(c.DataDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{cert, key} {
		if err := os.Chmod(f, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := chownLike(f, owner); err != nil {
			t.Fatal(err)
		}
	}
	psql(t, c, "ALTER SYSTEM SET ssl = on")
	psql(t, c, "SELECT pg_reload_conf()")
}

// chownLike gives file the owner of like (the server's user).
func chownLike(file string, like os.FileInfo) error {
	st := like.Sys().(*syscall.Stat_t)
	return os.Chown(file, int(st.Uid), int(st.Gid))
}
