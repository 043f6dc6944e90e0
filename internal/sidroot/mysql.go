package sidroot

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/mysandbox"
)

// MySQL is a server of the MySQL family from its root: Oracle's MySQL of
// the "mysql" root (sid's 9.7: TLS by default over TCP, with certificates
// it makes at initialization, through the root's OpenSSL 3), or MariaDB
// of the "mariadb" root (sid's 11.8: TLS by default too since 11.4, with a
// certificate of its own making); listening on 127.0.0.1 and on a unix
// socket in its directory.
type MySQL struct {
	*Server
	Port    int
	MariaDB bool
}

// MySQLUser is the user, with all privileges, that clients over TCP log in
// as (root may only come over the socket); its password is its name.
const MySQLUser = "dbiolat"

// StartMySQL initializes a data directory in a private directory of the
// root (the "mysql" or the "mariadb" root: the server is the one the root
// holds) and starts it, as how says, on port of 127.0.0.1, with settings
// added to its command line (--name=value); Stop stops it and removes the
// directory.
func StartMySQL(ctx context.Context, root string, how How, port int, log io.Writer, settings ...string) (*MySQL, error) {
	dir, err := NewDir(root, "my-", "mysql")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*MySQL, error) {
		os.RemoveAll(filepath.Join(root, dir))
		return nil, err
	}
	_, err = os.Stat(filepath.Join(root, "usr/sbin/mariadbd"))
	m := &MySQL{Port: port, MariaDB: err == nil}
	// --no-defaults: the root's /etc/mysql is the package's, for its own
	// service; the tests say everything.
	server, install := "/usr/sbin/mysqld", []string{"/usr/sbin/mysqld", "--no-defaults", "--initialize-insecure"}
	if m.MariaDB {
		server, install = "/usr/sbin/mariadbd", []string{"/usr/bin/mariadb-install-db", "--no-defaults", "--user=mysql", "--skip-name-resolve", "--force"}
	}
	// --tmpdir: a server at start removes every "#sql" file in its tmpdir
	// (temporary tables left by a crash), so servers sharing the root's
	// /tmp remove each other's, even while they are written.
	tmpdir := "--tmpdir=" + dir
	if _, err := Run(ctx, root, "mysql", log, append(install, "--datadir="+dir+"/data", tmpdir)...); err != nil {
		return fail(err)
	}
	sock := dir + "/mysqld.sock"
	ready := func() bool { // it listens once it takes connections
		c, err := net.Dial("unix", filepath.Join(root, sock))
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	args := []string{server, "--no-defaults", "--datadir=" + dir + "/data", "--socket=" + sock,
		"--pid-file=" + dir + "/mysqld.pid", tmpdir, "--bind-address=127.0.0.1", fmt.Sprintf("--port=%d", port)}
	if m.MariaDB { // clients over TCP come from 127.0.0.1, not from a name
		args = append(args, "--skip-name-resolve")
	} else {
		args = append(args, "--mysqlx=OFF", "--log-error-verbosity=2")
	}
	if m.Server, err = Start(root, dir, how, "mysql", log, ready, append(args, settings...)...); err != nil {
		return fail(err)
	}
	if _, err := m.SQL(ctx, fmt.Sprintf("CREATE USER '%[1]s'@'%%' IDENTIFIED BY '%[1]s'; GRANT ALL ON *.* TO '%[1]s'@'%%'", MySQLUser)); err != nil {
		m.Stop()
		return nil, err
	}
	return m, nil
}

// Stop shuts the server down and removes its directory.
func (m *MySQL) Stop() { m.Server.Stop(syscall.SIGTERM) }

// SQL runs statements with the root's mysql client as root over the unix
// socket and returns their output (tab-separated, no headers) trimmed.
func (m *MySQL) SQL(ctx context.Context, sql string) (string, error) {
	return m.run(m.Client(ctx), sql)
}

// SQLTLS runs statements over TCP to 127.0.0.1 as MySQLUser, TLS required:
// each statement a COM_QUERY of its own.
func (m *MySQL) SQLTLS(ctx context.Context, sql string) (string, error) {
	tls := []string{"--ssl-mode=REQUIRED"}
	if m.MariaDB { // its own certificate, not verified
		tls = []string{"--ssl", "--disable-ssl-verify-server-cert"}
	}
	cmd := m.client(ctx, append([]string{"--user=" + MySQLUser, "--password=" + MySQLUser, "--protocol=TCP", "--host=127.0.0.1",
		fmt.Sprintf("--port=%d", m.Port)}, tls...)...)
	return m.run(cmd, sql)
}

// Client is the root's client (mysql, mariadb), as root over the unix socket, with
// args added (--batch, no column names), for a session of a test's own.
func (m *MySQL) Client(ctx context.Context, args ...string) *exec.Cmd {
	return m.client(ctx, append([]string{"--user=root", "--socket=" + m.Dir + "/mysqld.sock"}, args...)...)
}

func (m *MySQL) client(ctx context.Context, args ...string) *exec.Cmd {
	client := "mysql"
	if m.MariaDB {
		client = "mariadb"
	}
	cmd := exec.CommandContext(ctx, "chroot", append([]string{m.Root, client, "--no-defaults", "--batch", "--skip-column-names"}, args...)...)
	cmd.Env = slices.Clone(rootEnv)
	return cmd
}

func (m *MySQL) run(cmd *exec.Cmd, sql string) (string, error) {
	cmd.Stdin = strings.NewReader(sql)
	out, err := cmdrun.Run(cmd, nil, "sidroot")
	return strings.TrimSpace(out), err
}

// Sysbench runs sysbench's phase against database sbtest over the
// server's socket as root (the machine's sysbench: Debian 12's links
// MariaDB's client library, which speaks MySQL 9's caching_sha2_password);
// prepare creates the database.
func (m *MySQL) Sysbench(ctx context.Context, o mysandbox.SysbenchOptions, phase string) (mysandbox.SysbenchResult, error) {
	if phase == "prepare" {
		if _, err := m.SQL(ctx, "CREATE DATABASE IF NOT EXISTS sbtest"); err != nil {
			return mysandbox.SysbenchResult{}, err
		}
	}
	conn := []string{"--mysql-user=root", "--mysql-socket=" + m.HostPath(m.Dir+"/mysqld.sock")}
	return mysandbox.RunSysbench(exec.CommandContext(ctx, "sysbench"), conn, o, phase)
}
