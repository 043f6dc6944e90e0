// Package mysandbox starts a throwaway MariaDB server for tests, the demo
// command and benchmarks: the MySQL-family twin of pgsandbox.
//
// The server lives entirely in a fresh temporary directory: the data
// directory, the error log, the pid file and the unix socket. Every program
// runs with --no-defaults, so no option file of a MariaDB or MySQL installed
// on the machine reaches it. It does not listen on TCP unless given a port,
// and then only on loopback, so several sandboxes can run side by side. Stop
// shuts the server down and removes the directory.
//
// mariadbd, unlike postgres, runs as root when told to (--user=root), so the
// server runs as the caller, whoever that is: no system user to switch to,
// no permissions to grant on Dir. Clients connect over the socket as the
// database's root user with an empty password (mariadb-install-db
// --auth-root-authentication-method=normal), which works for any OS user,
// where the default unix_socket authentication admits only OS root.
package mysandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/sandbox"
)

// ErrNotInstalled is returned (wrapped) when MariaDB's programs or sysbench
// cannot be found, so tests and benchmarks can skip rather than fail.
var ErrNotInstalled = errors.New("MariaDB or sysbench is not installed; install them, e.g. `apt-get install mariadb-server sysbench` (scripts/install-deps)")

// Options configures Start. The zero value is usable.
type Options struct {
	// Dir is the parent directory for the sandbox; "" = os.TempDir().
	// Benchmarks put it on the storage under test. The server runs as the
	// caller, so any directory the caller can write to will do.
	Dir string
	// Port, if > 0, makes the server listen on TCP at 127.0.0.1:Port too;
	// otherwise it runs with --skip-networking, reachable only through its
	// socket.
	Port int
	// Settings are mariadbd options (without the leading "--") that
	// override or add to the defaults, e.g. "thread_handling":
	// "pool-of-threads" or "innodb_buffer_pool_size": "64M". An empty value
	// passes the option bare ("skip_log_bin"); setting "log_bin" drops the
	// default "skip_log_bin" (and any X drops a default skip_X). They are
	// given to mariadb-install-db too, so options that fix the files'
	// format (innodb_page_size) hold from the start. The options that place
	// the server (datadir, socket, port, user...) are the sandbox's own.
	Settings map[string]string
	// Log receives progress messages, mariadb-install-db's output and, at
	// Stop, the server's error log; nil = discard. The error log is always
	// kept in the directory while the server runs, and its tail is included
	// in Start's errors.
	Log io.Writer
}

// defaultSettings are chosen for repeatable I/O measurements:
//
//   - innodb_buffer_pool_size=32M: small, so a table of more than about
//     100,000 sysbench rows (30 MB) does not fit and reads reach the
//     kernel. 10.11 accepts as little as 6M (with 16K pages), through
//     Settings.
//   - innodb_flush_method=fsync: InnoDB's default is O_DIRECT, which
//     bypasses the page cache, so every read of a data file would go to the
//     device. Buffered I/O lets a test choose a cold read (caches dropped)
//     or a warm one, as with PostgreSQL. The redo log keeps its own
//     setting (innodb_log_file_buffering, off: O_DIRECT when the device
//     allows it).
//   - performance_schema=ON: tests compare our counts with its statement
//     counts and file I/O waits.
//   - skip_log_bin: no binary log, so a commit writes the redo log only.
//   - max_connections=100: the same ceiling whatever the build's default.
//
// innodb_use_native_aio stays on: 10.11 then submits its asynchronous I/O
// (read-ahead, page flushing) through io_uring where the kernel allows it,
// and only its synchronous page reads (a query's own misses) are pread64
// calls; "innodb_use_native_aio": "0" makes them all pread64 and pwrite64,
// from InnoDB's I/O threads.
var defaultSettings = map[string]string{
	"innodb_buffer_pool_size": "32M",
	"innodb_flush_method":     "fsync",
	"performance_schema":      "ON",
	"skip_log_bin":            "",
	"max_connections":         "100",
}

// ownSettings are the options that place the server; Start sets them.
var ownSettings = map[string]bool{
	"datadir": true, "socket": true, "port": true, "bind_address": true,
	"skip_networking": true, "pid_file": true, "log_error": true, "user": true,
	"basedir": true,
}

// Server is a running sandbox server. Its methods are safe for concurrent
// use; its fields are not to be changed.
type Server struct {
	Dir     string // the sandbox's private directory: data/, the socket, the logs
	DataDir string
	Socket  string // the unix socket's path
	Port    int    // the TCP port on 127.0.0.1; 0 = none

	box     *sandbox.Dir      // Dir, its error log (error.log)
	tmpDir  string            // the server's and its scripts' temporary files
	bin     map[string]string // program name -> path
	cmd     *exec.Cmd         // mariadbd
	exited  chan struct{}     // closed once mariadbd has exited; waitErr is then set
	waitErr error
}

// Start creates a data directory, starts mariadbd on it and waits until it
// answers on its socket. If anything fails, whatever was started or created
// is stopped and removed again.
func Start(opts Options) (*Server, error) {
	s := &Server{bin: map[string]string{}}
	for _, name := range []string{"mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin"} {
		p, err := lookPath(name)
		if err != nil {
			return nil, err
		}
		s.bin[name] = p
	}
	if p, err := exec.LookPath("sysbench"); err == nil {
		s.bin["sysbench"] = p // optional: Sysbench says if it is missing
	}

	settings := maps.Clone(defaultSettings)
	for k, v := range opts.Settings {
		k = strings.ReplaceAll(k, "-", "_")
		if ownSettings[k] {
			return nil, fmt.Errorf("mysandbox: option %s is set by the sandbox itself and cannot be a setting", k)
		}
		delete(settings, "skip_"+k)
		if after, ok := strings.CutPrefix(k, "skip_"); ok {
			delete(settings, after)
		}
		settings[k] = v
	}
	var args []string
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		arg := "--" + strings.ReplaceAll(k, "_", "-")
		if v := settings[k]; v != "" {
			arg += "=" + v
		}
		args = append(args, arg)
	}

	// Mode 0700: only the caller, who is also the server, goes in.
	var err error
	if s.box, err = sandbox.New("mysandbox", opts.Dir, "error.log", opts.Log, nil); err != nil {
		return nil, err
	}
	s.Dir = s.box.Path
	s.DataDir = filepath.Join(s.Dir, "data")
	s.Socket = filepath.Join(s.Dir, "mysqld.sock")
	// Its own temporary directory: a starting mariadbd deletes every
	// #sql* file in its tmpdir, so sandboxes sharing /tmp (started side by
	// side) would delete each other's temporary tables.
	s.tmpDir = filepath.Join(s.Dir, "tmp")
	if err := os.Mkdir(s.tmpDir, 0o700); err != nil {
		os.RemoveAll(s.Dir)
		return nil, fmt.Errorf("mysandbox: %w", err)
	}
	args = append(args, "--tmpdir="+s.tmpDir)
	s.Port = max(opts.Port, 0)
	if err := s.box.CheckSocket(s.Socket); err != nil {
		os.RemoveAll(s.Dir)
		return nil, err
	}

	if err := s.start(args); err != nil {
		err = s.box.StartFailed(err)
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(settings []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fmt.Fprintf(s.box.Log, "mysandbox: mariadb-install-db %s\n", s.DataDir)
	// No --user: given one, mariadb-install-db also chowns the system's
	// PAM plugin directory (/usr/lib/mysql/plugin/auth_pam_tool_dir, which
	// belongs to the mysql user) to it. Without, it creates the files as the
	// caller, who runs the server too, and bootstraps as root as well.
	install := append([]string{"--no-defaults", "--auth-root-authentication-method=normal", "--skip-test-db",
		"--datadir=" + s.DataDir}, settings...)
	if _, err := cmdrun.Run(s.command(ctx, "mariadb-install-db", install...), s.box.Log, "mysandbox"); err != nil {
		return err
	}

	args := []string{"--no-defaults", "--datadir=" + s.DataDir, "--socket=" + s.Socket,
		"--pid-file=" + filepath.Join(s.Dir, "mariadbd.pid"), "--log-error=" + s.box.LogFile}
	// mariadbd refuses to run as root unless told to, and warns when told
	// which user to be while it is not root.
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	if s.Port > 0 {
		args = append(args, "--bind-address=127.0.0.1", "--port="+strconv.Itoa(s.Port))
	} else {
		args = append(args, "--skip-networking")
	}
	args = append(args, settings...)
	// Not tied to ctx: the server outlives Start.
	return s.run(ctx, s.command(context.Background(), "mariadbd", args...))
}

// run starts mariadbd as cmd says and waits until it answers on its
// socket. Whatever mariadbd prints before it opens its error log (a bad
// option) goes to the same file, so the log tail shows it.
func (s *Server) run(ctx context.Context, cmd *exec.Cmd) error {
	out, err := os.OpenFile(s.box.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("mysandbox: %w", err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	fmt.Fprintf(s.box.Log, "mysandbox: %s %s\n", cmd.Path, strings.Join(cmd.Args[1:], " "))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mysandbox: starting mariadbd: %w", err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited, s.waitErr = cmd, exited, nil
	go func() {
		s.waitErr = cmd.Wait()
		close(exited)
	}()
	ping, cancelPing := context.WithTimeout(ctx, time.Minute)
	defer cancelPing()
	for {
		select {
		case <-exited:
			return fmt.Errorf("mysandbox: mariadbd exited before it answered: %v", s.waitErr)
		case <-ping.Done():
			return errors.New("mysandbox: mariadbd did not answer on its socket within a minute")
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := os.Stat(s.Socket); err != nil {
			continue
		}
		if _, err := cmdrun.Run(s.command(ping, "mariadb-admin", append(s.ClientArgs(), "ping")...), nil, "mysandbox"); err == nil {
			fmt.Fprintf(s.box.Log, "mysandbox: mariadbd pid %d, socket %s\n", s.PID(), s.Socket)
			return nil
		}
	}
}

// Stop shuts the server down (mariadb-admin shutdown; SIGKILL if it has
// not exited within a minute) and removes the sandbox's directory. Calling
// it again returns the first result, so it can be both deferred (or
// registered with t.Cleanup) and called explicitly.
func (s *Server) Stop() error {
	return s.box.Stop(func() []error {
		if s.exited == nil {
			return nil
		}
		select {
		case <-s.exited:
			return []error{fmt.Errorf("mysandbox: mariadbd had exited before Stop: %v", s.waitErr)}
		default:
		}
		if err := s.halt(context.Background(), false); err != nil {
			return []error{err}
		}
		return nil
	})
}

// halt stops the running server, cleanly or with SIGKILL, and waits
// until its process is gone (reaped).
func (s *Server) halt(ctx context.Context, kill bool) error {
	if kill {
		if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("mysandbox: killing mariadbd: %w", err)
		}
		<-s.exited // SIGKILL cannot be caught: it goes
		return nil
	}
	shut, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := cmdrun.Run(s.command(shut, "mariadb-admin", append(s.ClientArgs(), "shutdown")...), s.box.Log, "mysandbox")
	select {
	case <-s.exited:
		return nil
	case <-shut.Done():
		s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("mysandbox: mariadbd did not shut down within a minute and was killed (shutdown: %v)", err)
	}
}

// PID returns mariadbd's process ID. The server is one process: its
// connections are threads of it.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// ClientArgs returns the arguments that connect MariaDB's client programs
// (mariadb, mariadb-admin, mariadb-dump...) to the server as its root user.
// They begin with --no-defaults, which must come first.
func (s *Server) ClientArgs() []string {
	return []string{"--no-defaults", "--protocol=socket", "--socket=" + s.Socket, "--user=root"}
}

// SQL runs query through the mariadb client in batch mode, without column
// names, on database db ("" = none) and returns its output trimmed: one
// line per row, tab-separated. The query is fed on stdin, so it may hold
// several statements; the first error stops it, and the error includes the
// client's message.
func (s *Server) SQL(ctx context.Context, db, query string) (string, error) {
	args := append(s.ClientArgs(), "--batch", "--skip-column-names")
	if db != "" {
		args = append(args, "--database="+db)
	}
	cmd := s.command(ctx, "mariadb", args...)
	cmd.Stdin = strings.NewReader(query)
	out, err := cmdrun.Run(cmd, nil, "mysandbox")
	return strings.TrimSpace(out), err
}

// command builds a command for one of the programs Start found, run in
// the sandbox's directory. MYSQL_* variables of ours (MYSQL_HOST,
// MYSQL_PWD...) are dropped so they cannot point a client elsewhere.
func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, s.bin[name], args...)
	cmd.Dir = s.Dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MYSQL_") && !strings.HasPrefix(kv, "TMPDIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TMPDIR="+s.tmpDir) // the scripts' own temporary files too
	return cmd
}

// lookPath finds a program on PATH or, since mariadbd lives there and a
// user's PATH often lacks it, in /usr/sbin.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/sbin", name)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return p, nil
	}
	return "", fmt.Errorf("mysandbox: no %s on PATH or in /usr/sbin: %w", name, ErrNotInstalled)
}
