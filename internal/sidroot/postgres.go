package sidroot

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
)

// Postgres is a PostgreSQL of the "postgresql" root (Debian's 18 or 19:
// with USDT, linking the root's OpenSSL 3), listening on 127.0.0.1 over
// TLS (a self-signed certificate) and on a unix socket in its directory,
// with pg_stat_statements created in database postgres.
type Postgres struct {
	*Server
	Version string // "18", "19"
	Port    int
}

// PostgresOptions says which PostgreSQL to start, how, and with what.
type PostgresOptions struct {
	Root     string // the "postgresql" root's directory (Root)
	Version  string // its major version: "18" or "19"
	How      How
	Port     int               // the TCP port on 127.0.0.1 (sandbox.FreePort)
	Settings map[string]string // postgresql.conf settings added or overridden
	Log      io.Writer         // initdb's and the server's output; nil: none
}

// StartPostgres makes a cluster in a private directory of the root and
// starts its server; Stop stops it and removes the directory.
func StartPostgres(ctx context.Context, o PostgresOptions) (*Postgres, error) {
	bin := "/usr/lib/postgresql/" + o.Version + "/bin"
	if _, err := os.Stat(filepath.Join(o.Root, bin, "postgres")); err != nil {
		return nil, fmt.Errorf("sidroot: no PostgreSQL %s in %s: %w", o.Version, o.Root, err)
	}
	dir, err := NewDir(o.Root, "pg-", "postgres")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Postgres, error) {
		os.RemoveAll(filepath.Join(o.Root, dir))
		return nil, err
	}
	data := dir + "/data"
	if _, err := Run(ctx, o.Root, "postgres", o.Log, bin+"/initdb", "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return fail(err)
	}
	if err := certificate(o.Root, data); err != nil {
		return fail(err)
	}
	settings := map[string]string{
		"listen_addresses":         "127.0.0.1",
		"port":                     fmt.Sprint(o.Port),
		"unix_socket_directories":  dir,
		"ssl":                      "on",
		"shared_preload_libraries": "pg_stat_statements",
		"pg_stat_statements.track": "all",
		"shared_buffers":           "16MB",
		"max_connections":          "30",
		"autovacuum":               "off",
	}
	maps.Copy(settings, o.Settings)
	var conf strings.Builder
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		fmt.Fprintf(&conf, "%s = '%s'\n", k, strings.ReplaceAll(settings[k], "'", "''"))
	}
	if err := appendFile(filepath.Join(o.Root, data, "postgresql.conf"), conf.String()); err != nil {
		return fail(err)
	}
	pidFile := filepath.Join(o.Root, data, "postmaster.pid")
	ready := func() bool { // postmaster.pid's status line says it takes connections
		b, _ := os.ReadFile(pidFile)
		lines := strings.Split(string(b), "\n")
		return len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready"
	}
	s, err := Start(o.Root, dir, o.How, "postgres", o.Log, ready, bin+"/postgres", "-D", data)
	if err != nil {
		return fail(err)
	}
	p := &Postgres{Server: s, Version: o.Version, Port: o.Port}
	if _, err := p.Psql(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// Stop shuts the server down (a fast shutdown) and removes its directory.
func (p *Postgres) Stop() { p.Server.Stop(syscall.SIGINT) }

// Psql runs SQL with the root's own psql over the server's unix socket, as
// postgres in database postgres, and returns its output (unaligned, tuples
// only) trimmed. The SQL is read as a script: each statement is a simple
// Query of its own.
func (p *Postgres) Psql(ctx context.Context, sql string) (string, error) {
	return p.psql(ctx, sql, false)
}

// PsqlTLS is Psql over TCP to 127.0.0.1 and TLS (sslmode=require).
func (p *Postgres) PsqlTLS(ctx context.Context, sql string) (string, error) {
	return p.psql(ctx, sql, true)
}

func (p *Postgres) psql(ctx context.Context, sql string, tls bool) (string, error) {
	host, mode := p.Dir, "disable"
	if tls {
		host, mode = "127.0.0.1", "require"
	}
	cmd := exec.CommandContext(ctx, "chroot", p.Root, "/usr/lib/postgresql/"+p.Version+"/bin/psql", "-X", "-q", "-A", "-t",
		"-v", "ON_ERROR_STOP=1", "-h", host, "-p", fmt.Sprint(p.Port), "-U", "postgres", "-d", "postgres", "-f", "-")
	cmd.Env = append(slices.Clone(rootEnv), "PGSSLMODE="+mode)
	cmd.Stdin = strings.NewReader(sql)
	out, err := cmdrun.Run(cmd, nil, "sidroot")
	return strings.TrimSpace(out), err
}

// certificate gives the cluster a self-signed certificate for TLS, made
// with our openssl, owned by the root's postgres.
func certificate(root, data string) error {
	cert, key := filepath.Join(root, data, "server.crt"), filepath.Join(root, data, "server.key")
	if out, err := exec.Command("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
		"-subj", "/CN=localhost", "-keyout", key, "-out", cert).CombinedOutput(); err != nil {
		return fmt.Errorf("sidroot: openssl: %v: %s", err, out)
	}
	uid, gid, err := IDs(root, "postgres")
	if err != nil {
		return err
	}
	for _, f := range []string{cert, key} {
		if err := os.Chmod(f, 0o600); err != nil {
			return fmt.Errorf("sidroot: %w", err)
		}
		if err := os.Chown(f, uid, gid); err != nil {
			return fmt.Errorf("sidroot: %w", err)
		}
	}
	return nil
}

func appendFile(name, text string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("sidroot: %w", err)
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sidroot: %w", err)
	}
	return nil
}
