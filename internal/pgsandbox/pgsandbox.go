// Package pgsandbox starts a throwaway PostgreSQL cluster for tests, the demo
// command and benchmarks.
//
// The cluster lives entirely in a fresh temporary directory: the data
// directory, the server log and the unix socket. The server does not listen on
// TCP (listen_addresses is empty), so several sandboxes can run side by side and none
// of them interferes with a PostgreSQL already installed on the machine. Stop
// shuts the server down and removes the directory.
//
// PostgreSQL refuses to run as root, so when the caller is root the server
// and every client program started through a Cluster (psql, pgbench) run as
// the "postgres" system user; otherwise they run as the current user.
// Clients connect over the socket with trust authentication.
package pgsandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/sandbox"
	"github.com/dbiolat/dbiolat/internal/sidroot"
)

// ErrNotInstalled is returned (wrapped) by Start when no PostgreSQL server
// binaries can be found, so tests and benchmarks can skip rather than fail.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb) not found; install them, e.g. `apt-get install postgresql postgresql-contrib`")

// Options configures Start. The zero value is usable.
type Options struct {
	// Dir is the parent directory for the cluster; "" = os.TempDir().
	// Benchmarks put it on the storage under test. When running as root it
	// must be traversable by the postgres user (t.TempDir() is not: it is
	// mode 0700).
	Dir string
	// Version is the PostgreSQL major version to run (Versions): "" is
	// Debian's, installed on the machine; others are installed on first
	// use (Install); a root's (19) runs chrooted in it, its cluster
	// directory in the root's /tmp (Dir does not apply).
	Version string
	// BinDir holds initdb, postgres and pg_ctl (and psql and pgbench, else
	// Debian's are used); "" = Version's.
	BinDir string
	// Settings are extra postgresql.conf settings that override the
	// defaults, e.g. "shared_buffers": "16MB". Values are written quoted, so
	// pass them without quotes. unix_socket_directories is always the
	// cluster directory (SocketDir and Env depend on it); "port" only
	// renames the socket file and is reflected by Port.
	Settings map[string]string
	// DataChecksums turns page checksums on (initdb --data-checksums);
	// off by default in every version, though 18's initdb alone would
	// turn them on: 18 verifies them inside the window track_io_timing
	// times, the others after it.
	DataChecksums bool
	// Log receives progress messages, initdb/pg_ctl output and, at Stop, the
	// server log; nil = discard. The server log is always also kept in the
	// cluster directory while it runs, and its tail is included in Start
	// errors.
	Log io.Writer
}

// defaultSettings are chosen for repeatable I/O measurements: small shared
// buffers so reads reach the kernel, no parallel workers or autovacuum
// adding I/O from processes other than the backend under test (tests turn
// autovacuum on when they need it), durable commits so WAL flushes are real,
// and pg_stat_statements to compare our numbers with PostgreSQL's own.
var defaultSettings = map[string]string{
	"listen_addresses":                "",
	"port":                            "5432",
	"shared_buffers":                  "16MB",
	"max_connections":                 "50",
	"track_io_timing":                 "on",
	"shared_preload_libraries":        "pg_stat_statements",
	"pg_stat_statements.track":        "all",
	"max_parallel_workers_per_gather": "0",
	"fsync":                           "on",
	"synchronous_commit":              "on",
	"autovacuum":                      "off",
	"logging_collector":               "off",
}

// Cluster is a running sandbox cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	box     *sandbox.Dir // private directory: socket, log (server.log), data/
	dataDir string
	binDir  string // the server's: initdb, pg_ctl, postgres
	clients string // psql's and pgbench's
	version string // major version, from the data directory
	port    int
	user    string              // database superuser (= OS user running the server)
	cred    *syscall.Credential // the clients': nil unless we are root
	pid     int
	// root, if set, is the Debian sid root the server runs chrooted in
	// (rootBuilds), its directory in it; serverCred is its user there.
	root       string
	serverCred *syscall.Credential
}

// Start creates, configures and starts a new cluster, and creates the
// pg_stat_statements extension in database postgres. If anything fails,
// whatever was started or created is stopped and removed again.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	var binDir, root string
	var err error
	if opts.BinDir != "" {
		binDir, err = findBinDir(opts.BinDir)
	} else {
		binDir, root, err = Install(ctx, opts.Version)
	}
	if err != nil {
		return nil, err
	}
	clients := binDir
	if _, err := os.Stat(filepath.Join(binDir, "psql")); err != nil || root != "" { // a root's need its libraries
		if clients, err = findBinDir(""); err != nil {
			return nil, fmt.Errorf("pgsandbox: the clients psql and pgbench come from Debian's PostgreSQL: %w", err)
		}
	}
	c := &Cluster{binDir: binDir, clients: clients, root: root}

	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgsandbox: running as root, but PostgreSQL refuses root and there is no postgres system user to run it as: %w", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		c.user = "postgres"
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	} else {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("pgsandbox: current user: %w", err)
		}
		c.user = u.Username
	}

	settings := maps.Clone(defaultSettings)
	maps.Copy(settings, opts.Settings)
	if c.port, err = strconv.Atoi(settings["port"]); err != nil {
		return nil, fmt.Errorf("pgsandbox: bad port setting %q", settings["port"])
	}

	var check func(string) error
	dir := opts.Dir
	if root != "" { // the server's user is the root's, its directory in the root
		if uid, gid, err = sidroot.IDs(root, "postgres"); err != nil {
			return nil, err
		}
		c.serverCred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		dir = filepath.Join(root, "tmp")
	} else if c.cred != nil {
		check = func(parent string) error { return checkTraversable(parent, uid, gid) }
		c.serverCred = c.cred
	}
	if c.box, err = sandbox.New("pgsandbox", dir, "server.log", opts.Log, check); err != nil {
		return nil, err
	}
	c.dataDir = filepath.Join(c.box.Path, "data")
	settings["unix_socket_directories"] = c.serverPath(c.box.Path)
	if err := c.box.CheckSocket(c.socketPath()); err != nil {
		os.RemoveAll(c.box.Path)
		return nil, err
	}

	if err := c.start(ctx, settings, opts.DataChecksums); err != nil {
		err = c.box.StartFailed(err)
		if strings.Contains(cmdrun.LogTail(c.box.LogFile, 20), "pg_stat_statements") {
			err = fmt.Errorf("%w\n(is postgresql-contrib installed?)", err)
		}
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, settings map[string]string, checksums bool) error {
	if c.serverCred != nil {
		if err := os.Chown(c.box.Path, int(c.serverCred.Uid), int(c.serverCred.Gid)); err != nil {
			return fmt.Errorf("pgsandbox: %w", err)
		}
	}
	mode := os.FileMode(0o700)
	if c.root != "" { // the clients, the machine's, run as its own postgres user
		mode = 0o711
	}
	if err := os.Chmod(c.box.Path, mode); err != nil {
		return fmt.Errorf("pgsandbox: %w", err)
	}

	fmt.Fprintf(c.box.Log, "pgsandbox: initdb %s (binaries %s, user %s)\n", c.dataDir, c.binDir, c.user)
	out, err := c.run(ctx, "postgres", "--version") // "postgres (PostgreSQL) 18.4", "... 19~rc1 (Debian 19~rc1-1)"
	if err != nil {
		return err
	}
	_, release, _ := strings.Cut(out, "(PostgreSQL) ")
	c.version = release[:len(release)-len(strings.TrimLeft(release, "0123456789"))]
	if c.version == "" {
		return fmt.Errorf("pgsandbox: postgres --version said %q", out)
	}
	args := []string{"-D", c.serverPath(c.dataDir), "-U", c.user, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"}
	if checksums {
		args = append(args, "--data-checksums")
	} else if v, _ := strconv.Atoi(c.version); v >= 18 {
		args = append(args, "--no-data-checksums") // on by default from 18
	}
	if _, err := c.run(ctx, "initdb", args...); err != nil {
		return err
	}

	// Later lines in postgresql.conf override earlier ones, so appending is
	// enough.
	var conf strings.Builder
	conf.WriteString("\n# pgsandbox\n")
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&conf, "%s = '%s'\n", k, strings.ReplaceAll(settings[k], "'", "''"))
	}
	f, err := os.OpenFile(filepath.Join(c.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgsandbox: %w", err)
	}
	_, err = f.WriteString(conf.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pgsandbox: %w", err)
	}

	if _, err := c.run(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", c.serverPath(c.dataDir), "-l", c.serverPath(c.box.LogFile)); err != nil {
		return err
	}
	if c.pid, err = readPostmasterPID(c.dataDir); err != nil {
		return fmt.Errorf("pgsandbox: %w", err)
	}
	fmt.Fprintf(c.box.Log, "pgsandbox: postmaster pid %d, socket %s\n", c.pid, c.socketPath())

	if strings.Contains(settings["shared_preload_libraries"], "pg_stat_statements") {
		if _, err := c.Psql(ctx, "postgres", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
			return err
		}
	}
	return nil
}

// Restart stops the server (pg_ctl restart -m fast) and starts it again,
// as an operator or a package upgrade does: a new postmaster PID, and the
// server binary read anew from BinDir.
func (c *Cluster) Restart(ctx context.Context) error {
	if _, err := c.run(ctx, "pg_ctl", "restart", "-w", "-t", "60", "-m", "fast", "-D", c.serverPath(c.dataDir), "-l", c.serverPath(c.box.LogFile)); err != nil {
		return err
	}
	pid, err := readPostmasterPID(c.dataDir)
	if err != nil {
		return fmt.Errorf("pgsandbox: %w", err)
	}
	c.pid = pid
	return nil
}

// Stop shuts the server down (pg_ctl stop -m fast, falling back to -m
// immediate) and removes the cluster directory. Calling it again returns the
// first result, so it can be both deferred/registered with t.Cleanup and
// called explicitly.
func (c *Cluster) Stop() error {
	return c.box.Stop(func() []error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var errs []error
		if _, err := os.Stat(filepath.Join(c.dataDir, "postmaster.pid")); err == nil {
			if _, err := c.run(ctx, "pg_ctl", "stop", "-w", "-t", "60", "-m", "fast", "-D", c.serverPath(c.dataDir)); err != nil {
				errs = append(errs, err)
				if _, err := c.run(ctx, "pg_ctl", "stop", "-w", "-t", "30", "-m", "immediate", "-D", c.serverPath(c.dataDir)); err != nil {
					errs = append(errs, err)
				}
			}
		}
		return errs
	})
}

// PostmasterPID returns the postmaster's PID as read from postmaster.pid at
// start, so callers can find the server's processes (backends are its
// children).
func (c *Cluster) PostmasterPID() int { return c.pid }

// DataDir returns the data directory (PGDATA).
func (c *Cluster) DataDir() string { return c.dataDir }

// SocketDir returns the directory holding the server's unix socket (PGHOST).
func (c *Cluster) SocketDir() string { return c.box.Path }

// Port returns the port number, which only names the socket file
// (.s.PGSQL.<port>); the socket directory is private, so the fixed default
// 5432 cannot collide with another server.
func (c *Cluster) Port() int { return c.port }

// BinDir returns the directory of the server's binaries in use.
func (c *Cluster) BinDir() string { return c.binDir }

// Version returns the server's major version ("15", "18").
func (c *Cluster) Version() string { return c.version }

// Env returns PGHOST, PGPORT, PGUSER and PGDATABASE (as "K=V") for psql,
// pgbench or other libpq clients started by others; append it to
// os.Environ(). When running as root such clients must run as the postgres
// user too (see PsqlCmd) or as root connecting with PGUSER=postgres.
func (c *Cluster) Env() []string {
	return []string{
		"PGHOST=" + c.box.Path,
		"PGPORT=" + strconv.Itoa(c.port),
		"PGUSER=" + c.user,
		"PGDATABASE=postgres",
	}
}

// Psql runs SQL through psql -X -q -A -t -v ON_ERROR_STOP=1 on database db
// ("" = "postgres") and returns stdout trimmed; on error the error includes
// psql's stderr. The SQL is fed on stdin, so it may hold several statements
// (each its own transaction, which CREATE DATABASE or VACUUM need).
func (c *Cluster) Psql(ctx context.Context, db, sql string) (string, error) {
	cmd := c.PsqlCmd(ctx, db, "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-f", "-")
	cmd.Stdin = strings.NewReader(sql)
	out, err := cmdrun.Run(cmd, nil, "pgsandbox")
	return strings.TrimSpace(out), err
}

// PsqlCmd returns an *exec.Cmd ready to run psql -X with the given extra args
// on database db ("" = "postgres"), for callers that need a long-running
// session (e.g. holding a lock) or to know the backend PID. It runs as the
// server's user; if you set SysProcAttr, keep its Credential.
func (c *Cluster) PsqlCmd(ctx context.Context, db string, args ...string) *exec.Cmd {
	return c.command(ctx, db, "psql", append([]string{"-X"}, args...)...)
}

// Pgbench runs pgbench with args against database db ("" = "postgres") and
// returns its stdout (the report ParsePgbench reads); on error the error
// includes pgbench's stderr.
func (c *Cluster) Pgbench(ctx context.Context, db string, args ...string) (string, error) {
	return cmdrun.Run(c.command(ctx, db, "pgbench", args...), nil, "pgsandbox")
}

// PgbenchCmd returns an *exec.Cmd ready to run pgbench with args against
// database db, for callers that set its environment (PGSSLMODE, say).
func (c *Cluster) PgbenchCmd(ctx context.Context, db string, args ...string) *exec.Cmd {
	return c.command(ctx, db, "pgbench", args...)
}

// CreateDatabase creates a database, so tests and benchmarks can keep their
// tables (and pg_stat_statements entries) apart.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	_, err := c.Psql(ctx, "postgres", `CREATE DATABASE "`+strings.ReplaceAll(name, `"`, `""`)+`"`)
	return err
}

// command builds a command for one of the PostgreSQL binaries, run as the
// server's user in the cluster directory with the sandbox's libpq
// environment (any PG* variables of ours are dropped so they cannot point
// the client elsewhere).
func (c *Cluster) command(ctx context.Context, db, name string, args ...string) *exec.Cmd {
	if db == "" {
		db = "postgres"
	}
	if name != "psql" && name != "pgbench" { // the server's own programs
		cmd := exec.CommandContext(ctx, c.serverPath(filepath.Join(c.binDir, name)), args...)
		cmd.Dir = c.serverPath(c.box.Path)
		cmd.Env = c.env(db)
		// Chrooted (in a root) before its user is set and its directory entered.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.serverCred, Chroot: c.root}
		return cmd
	}
	cmd := exec.CommandContext(ctx, filepath.Join(c.clients, name), args...)
	cmd.Dir = c.box.Path
	cmd.Env = c.env(db)
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

// env is ours without any PG* variable, and the sandbox's libpq environment.
func (c *Cluster) env(db string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	env = append(env, c.Env()...)
	return append(env, "PGDATABASE="+db) // last one wins
}

// serverPath is a path of ours as the server's programs see it: in its
// root, if it runs in one.
func (c *Cluster) serverPath(p string) string {
	if c.root == "" {
		return p
	}
	return "/" + strings.TrimPrefix(strings.TrimPrefix(p, c.root), "/")
}

// run runs a server-side program (initdb, pg_ctl), copying its output to the
// log.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	return cmdrun.Run(c.command(ctx, "", name, args...), c.box.Log, "pgsandbox")
}

func (c *Cluster) socketPath() string {
	return filepath.Join(c.box.Path, ".s.PGSQL."+strconv.Itoa(c.port))
}

func readPostmasterPID(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	return pid, nil
}

// InstalledBinDir is the bin directory Start uses when Options.BinDir is
// empty.
func InstalledBinDir() (string, error) { return findBinDir("") }

// findBinDir returns dir if given, else the newest /usr/lib/postgresql/*/bin
// with an initdb (Debian/Ubuntu layout), else the directory of initdb on
// PATH.
func findBinDir(dir string) (string, error) {
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err != nil {
			return "", fmt.Errorf("pgsandbox: BinDir %s: %w", dir, ErrNotInstalled)
		}
		return dir, nil
	}
	best, bestVer := "", -1.0
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	for _, m := range matches {
		bin := filepath.Dir(m)
		ver, err := strconv.ParseFloat(filepath.Base(filepath.Dir(bin)), 64) // "15", "9.6"
		if err == nil && ver > bestVer {
			best, bestVer = bin, ver
		}
	}
	if best != "" {
		return best, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("pgsandbox: %w", ErrNotInstalled)
}

// checkTraversable reports a clear error when uid/gid (with no supplementary
// groups, as we start the server) cannot reach dir, instead of a puzzling
// initdb "permission denied".
func checkTraversable(dir string, uid, gid int) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pgsandbox: %w", err)
		}
		m := fi.Mode().Perm()
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok && m&0o001 == 0 && !(int(st.Uid) == uid && m&0o100 != 0) && !(int(st.Gid) == gid && m&0o010 != 0) {
			return fmt.Errorf("pgsandbox: the postgres user cannot enter %s (mode %v), which is on the path to %s; use a Dir it can reach, e.g. under /tmp", d, m, dir)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
