package sidroot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/sandbox"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// A user's ids are read from the root's own /etc/passwd, not ours.
func TestIDs(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\npostgres:x:101:104::/var/lib/postgresql:/bin/sh\n"), 0o644)
	if uid, gid, err := IDs(root, "postgres"); uid != 101 || gid != 104 || err != nil {
		t.Errorf("postgres: %d %d %v", uid, gid, err)
	}
	if _, _, err := IDs(root, "mysql"); err == nil {
		t.Error("a user the root lacks has ids")
	}
}

// PostgreSQL 19 of the postgresql root runs each way, over TLS, with
// pg_stat_statements; its main process is the postmaster as we see it.
func TestPostgresEachWay(t *testing.T) {
	root := rootFor(t, "postgresql")
	for _, how := range Hows {
		t.Run(how.String(), func(t *testing.T) {
			port, err := sandbox.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			p, err := StartPostgres(context.Background(), PostgresOptions{Root: root, Version: "19", How: how, Port: port})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			out, err := p.Psql(context.Background(), "SHOW ssl; SELECT count(*) >= 0 FROM pg_stat_statements")
			if err != nil || out != "on\nt" {
				t.Errorf("ssl and pg_stat_statements: %q, %v", out, err)
			}
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID())); err != nil || filepath.Base(exe) != "postgres" {
				t.Errorf("the main process %d runs %q (%v)", p.PID(), exe, err)
			}
			dir := p.HostPath(p.Dir)
			p.Stop()
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s is left behind: %v", dir, err)
			}
		})
	}
}

// MySQL 9.7 of the mysql root and MariaDB 11.8 of the mariadb root run
// each way; a client over TCP is on TLS, as each server has it by default.
func TestMySQLEachWay(t *testing.T) {
	for name, server := range map[string]string{"mysql": "mysqld", "mariadb": "mariadbd"} {
		root := rootFor(t, name)
		for _, how := range Hows {
			t.Run(name+"/"+how.String(), func(t *testing.T) {
				port, err := sandbox.FreePort()
				if err != nil {
					t.Fatal(err)
				}
				m, err := StartMySQL(context.Background(), root, how, port, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Stop()
				out, err := m.SQLTLS(context.Background(), "SHOW SESSION STATUS LIKE 'Ssl_version'")
				if err != nil || !strings.HasPrefix(out, "Ssl_version\tTLSv1.") {
					t.Errorf("over TCP: %q, %v", out, err)
				}
				if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", m.PID())); err != nil || filepath.Base(exe) != server {
					t.Errorf("the main process %d runs %q (%v)", m.PID(), exe, err)
				}
				// Its temporary files in its own directory: at start a
				// server removes the "#sql" files of its tmpdir, another's too.
				if out, err := m.SQL(context.Background(), "SELECT @@tmpdir"); err != nil || out != m.Dir {
					t.Errorf("tmpdir %q (%v), want its own %s", out, err, m.Dir)
				}
			})
		}
	}
}

// rootFor is a root's directory, built on first use; outside CI a machine
// that cannot build one skips.
func rootFor(t *testing.T, name string) string {
	t.Helper()
	testenv.NeedRoot(t)
	root, err := Root(name)
	if errors.Is(err, ErrUnavailable) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return root
}
