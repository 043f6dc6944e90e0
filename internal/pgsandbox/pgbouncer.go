package pgsandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/sandbox"
)

// ErrNoPgbouncer is returned (wrapped) by StartPgbouncer when pgbouncer is
// not installed, so that tests can skip rather than fail.
var ErrNoPgbouncer = errors.New("pgbouncer not found; install it: `apt-get install pgbouncer`")

// PgbouncerOptions configures StartPgbouncer.
type PgbouncerOptions struct {
	// PoolMode is pgbouncer's pool_mode: "session" (the default) or
	// "transaction".
	PoolMode string
	// PoolSize is default_pool_size, the server connections per database
	// and user; 0: pgbouncer's default (20). Fewer than the clients makes
	// them share server connections in transaction pooling.
	PoolSize int
	// ServerTCP: it reaches the cluster over TCP on 127.0.0.1 (the
	// cluster must listen there: Settings' listen_addresses), not over
	// its unix socket.
	ServerTCP bool
}

// Pgbouncer is a pgbouncer of a sandbox cluster's own: its private
// directory (configuration, auth file, log), listening on a free port of
// 127.0.0.1 and on no unix socket, and connecting to the cluster over its
// unix socket (or TCP: ServerTCP). It never touches the system's pgbouncer service or its
// /etc/pgbouncer.
type Pgbouncer struct {
	box  *sandbox.Dir
	cmd  *exec.Cmd
	port int
	exit chan error
}

// StartPgbouncer starts a pgbouncer in front of the cluster, with trust
// authentication for the cluster's user, and waits until it accepts
// connections. Stop it with Stop (registering it with t.Cleanup is enough).
func (c *Cluster) StartPgbouncer(ctx context.Context, opts PgbouncerOptions) (*Pgbouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/pgbouncer"); err != nil {
			return nil, fmt.Errorf("pgsandbox: %w", ErrNoPgbouncer)
		}
	}
	port, err := sandbox.FreePort()
	if err != nil {
		return nil, fmt.Errorf("pgsandbox: pgbouncer's port: %w", err)
	}
	box, err := sandbox.New("pgbouncer", filepath.Dir(c.box.Path), "pgbouncer.log", c.box.Log, nil)
	if err != nil {
		return nil, err
	}
	p := &Pgbouncer{box: box, port: port, exit: make(chan error, 1)}
	if err := p.start(ctx, c, bin, opts); err != nil {
		err = box.StartFailed(err)
		p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *Pgbouncer) start(ctx context.Context, c *Cluster, bin string, opts PgbouncerOptions) error {
	mode := opts.PoolMode
	if mode == "" {
		mode = "session"
	}
	server := c.box.Path
	if opts.ServerTCP {
		server = "127.0.0.1"
	}
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = %s
pool_mode = %s
max_client_conn = 200
logfile = %s
pidfile = %s
ignore_startup_parameters = extra_float_digits
`, server, c.port, p.port, filepath.Join(p.box.Path, "userlist.txt"), c.user, mode, p.box.LogFile,
		filepath.Join(p.box.Path, "pgbouncer.pid"))
	if opts.PoolSize > 0 {
		conf += fmt.Sprintf("default_pool_size = %d\n", opts.PoolSize)
	}
	files := map[string]string{
		"pgbouncer.ini": conf,
		"userlist.txt":  fmt.Sprintf("%q \"\"\n", c.user), // trust still wants the user listed
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(p.box.Path, name), []byte(text), 0o600); err != nil {
			return fmt.Errorf("pgsandbox: %w", err)
		}
	}
	// pgbouncer refuses to run as root: as root, it runs as the server's user.
	if c.cred != nil {
		for _, name := range []string{"", "pgbouncer.ini", "userlist.txt"} {
			if err := os.Chown(filepath.Join(p.box.Path, name), int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return fmt.Errorf("pgsandbox: %w", err)
			}
		}
	}
	p.cmd = exec.Command(bin, filepath.Join(p.box.Path, "pgbouncer.ini"))
	p.cmd.Dir = p.box.Path
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("pgsandbox: starting pgbouncer: %w", err)
	}
	go func() { p.exit <- p.cmd.Wait() }()
	fmt.Fprintf(p.box.Log, "pgbouncer: pid %d, %s pooling, 127.0.0.1:%d\n", p.cmd.Process.Pid, mode, p.port)
	for {
		conn, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case err := <-p.exit:
			p.exit <- err
			return fmt.Errorf("pgsandbox: pgbouncer exited as it started: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("pgsandbox: pgbouncer does not accept connections: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// PID is pgbouncer's process.
func (p *Pgbouncer) PID() int { return p.cmd.Process.Pid }

// Port is the port it listens on, on 127.0.0.1.
func (p *Pgbouncer) Port() int { return p.port }

// Addr is host:port, to connect to.
func (p *Pgbouncer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// ClientArgs are the libpq options of psql or pgbench that connect
// through it rather than to the cluster.
func (p *Pgbouncer) ClientArgs() []string {
	return []string{"-h", "127.0.0.1", "-p", strconv.Itoa(p.port)}
}

// Stop shuts pgbouncer down (SIGINT: at once, clients or not), shows its
// log and removes its directory; calling it again returns the first result.
func (p *Pgbouncer) Stop() error {
	return p.box.Stop(func() []error {
		if p.cmd == nil || p.cmd.Process == nil {
			return nil
		}
		cmdrun.Stop(p.cmd.Process, syscall.SIGINT, p.exit, 30*time.Second)
		return nil
	})
}

// Logins lists the client connections pgbouncer has logged in so far,
// as its log names them ("127.0.0.1:38536"), in order: what it saw, to
// check what others say of its clients against.
func (p *Pgbouncer) Logins() ([]string, error) {
	b, err := os.ReadFile(p.box.LogFile)
	if err != nil {
		return nil, fmt.Errorf("pgsandbox: %w", err)
	}
	return ParseLogins(string(b)), nil
}

// ParseLogins reads the client addresses of a pgbouncer log's login
// lines: "... LOG C-0x55a0f52d9570: db/user@127.0.0.1:38536 login attempt: ...";
// a unix socket's client is "unix(PID):PORT".
func ParseLogins(log string) []string {
	var out []string
	for line := range strings.Lines(log) {
		before, _, ok := strings.Cut(line, " login attempt: ")
		if !ok {
			continue
		}
		fields := strings.Fields(before)
		if len(fields) == 0 {
			continue
		}
		_, addr, ok := strings.Cut(fields[len(fields)-1], "@")
		if _, _, err := net.SplitHostPort(addr); ok && err == nil {
			out = append(out, addr)
		}
	}
	return out
}
