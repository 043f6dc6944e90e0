// Package sidroot runs servers for tests in the project's Debian sid roots
// (built and cached by scripts/sid-root: MySQL 9.7, MariaDB 11.8,
// PostgreSQL 18 and 19), the ways users run them: plainly in a chroot, in
// a container with namespaces of its own (podman with the root as its
// rootfs, as in a pod), or chrooted inside such a container. Each server
// gets a private directory in the root's /tmp; the roots themselves are
// shared and left as they were.
package sidroot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
)

// How a server runs in its root.
type How int

const (
	// Chroot: `chroot ROOT`, in our own mount and pid namespaces; maps
	// names its files with the root's directory in front.
	Chroot How = iota
	// Container: `podman run --rootfs ROOT --network host`, in mount, pid,
	// UTS and IPC namespaces of its own; maps names its files as it sees
	// them.
	Container
	// ChrootInContainer: the container above, the server chrooted inside it
	// into the root bind-mounted at /srv/sid; maps names its files
	// /srv/sid/..., as the container sees them.
	ChrootInContainer
)

// Hows is every way, in order.
var Hows = []How{Chroot, Container, ChrootInContainer}

func (h How) String() string {
	return [...]string{"chroot", "container", "chroot-in-container"}[h]
}

// innerRoot is where ChrootInContainer mounts the root in the container.
const innerRoot = "/srv/sid"

// ErrUnavailable says a root cannot be built on this machine (not root,
// or no debootstrap): tests skip, but fail under CI.
var ErrUnavailable = errors.New("the sid roots need root and debootstrap (scripts/install-deps)")

// Root returns the directory of the root named name ("postgresql",
// "mysql", "mariadb"), building it first if it is missing or stale
// (scripts/sid-root: minutes the first time, then nothing).
func Root(name string) (string, error) {
	if os.Geteuid() != 0 {
		return "", ErrUnavailable
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return "", ErrUnavailable
	}
	script, err := scriptPath()
	if err != nil {
		return "", err
	}
	out, err := cmdrun.Run(exec.Command(script, "--path", name), nil, "sidroot")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// scriptPath finds scripts/sid-root in the module tree above the working
// directory (a test's is its package's).
func scriptPath() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "scripts", "sid-root"), nil
		}
		if dir == filepath.Dir(dir) {
			return "", errors.New("sidroot: scripts/sid-root not found above the working directory")
		}
		dir = filepath.Dir(dir)
	}
}

// Server is a server running in a root.
type Server struct {
	Root string // the root's directory, as we see it
	Dir  string // the server's private directory, as the server sees it (under /tmp)
	How  How
	User string // the root's user it runs as

	cmd     *exec.Cmd
	exited  chan struct{}
	name    string // its container's name (Container, ChrootInContainer)
	pid     int    // the server's main process, as we see it
	out     *lockedLog
	stopped sync.Once
}

// NewDir makes a private directory in the root's /tmp owned by user (a
// user of the root's /etc/passwd), and returns it as the server sees it.
func NewDir(root, prefix, user string) (string, error) {
	uid, gid, err := IDs(root, user)
	if err != nil {
		return "", err
	}
	host, err := os.MkdirTemp(filepath.Join(root, "tmp"), prefix)
	if err != nil {
		return "", fmt.Errorf("sidroot: %w", err)
	}
	if err := os.Chown(host, uid, gid); err != nil {
		os.RemoveAll(host)
		return "", fmt.Errorf("sidroot: %w", err)
	}
	return strings.TrimPrefix(host, root), nil
}

// IDs are a user's uid and gid in the root's /etc/passwd.
func IDs(root, user string) (uid, gid int, err error) {
	f, err := os.Open(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		return 0, 0, fmt.Errorf("sidroot: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Split(sc.Text(), ":") // name:x:uid:gid:...
		if len(fl) >= 4 && fl[0] == user {
			uid, err1 := strconv.Atoi(fl[2])
			gid, err2 := strconv.Atoi(fl[3])
			if err1 == nil && err2 == nil {
				return uid, gid, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("sidroot: no user %s in %s/etc/passwd", user, root)
}

// Run runs a program in the root as user, plainly chrooted (setting a
// server up: initdb), and returns its output.
func Run(ctx context.Context, root, user string, log io.Writer, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "chroot", append([]string{"--userspec=" + user + ":" + user, root}, args...)...)
	cmd.Env = rootEnv
	return cmdrun.Run(cmd, log, "sidroot")
}

// rootEnv is the environment of programs run in a root: none of ours.
var rootEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "HOME=/tmp"}

// Start starts a server (args: its program in the root and its arguments,
// in the foreground) in dir (NewDir's) of root, as user, the way how says;
// ready says, from the host's side, when it is up. Its output goes to log
// and, if it does not become ready in two minutes, into the error.
func Start(root, dir string, how How, user string, log io.Writer, ready func() bool, args ...string) (*Server, error) {
	s := &Server{Root: root, Dir: dir, How: how, User: user, exited: make(chan struct{}), out: &lockedLog{w: log}}
	switch how {
	case Chroot:
		s.cmd = exec.Command("chroot", append([]string{"--userspec=" + user + ":" + user, root}, args...)...)
	case Container, ChrootInContainer:
		s.name = fmt.Sprintf("dbiolat-sid-%d-%s", os.Getpid(), filepath.Base(dir))
		run := []string{"--runtime=runc", "run", "--rm", "--name", s.name, "--network", "host"}
		run = append(run, limits()...)
		if how == Container {
			run = append(run, "--user", user)
		} else {
			run = append(run, "--volume", root+":"+innerRoot, "--user", "root")
			args = append([]string{"chroot", "--userspec=" + user + ":" + user, innerRoot}, args...)
		}
		for _, kv := range rootEnv {
			run = append(run, "--env", kv)
		}
		// --rootfs is a switch: the root is its first argument, where an
		// image would be, and what follows is the command.
		run = append(run, "--rootfs", root)
		s.cmd = exec.Command("podman", append(run, args...)...)
	}
	s.cmd.Env = rootEnv
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	fmt.Fprintf(s.out, "sidroot: %s\n", strings.Join(s.cmd.Args, " "))
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("sidroot: %w", err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		select {
		case <-s.exited:
			s.Stop(syscall.SIGTERM)
			return nil, fmt.Errorf("sidroot: the server in %s (%s) exited: %s", root, how, s.out.tail())
		default:
		}
		if s.pid == 0 {
			s.pid = s.mainPID()
		}
		if s.pid != 0 && ready() {
			return s, nil
		}
		if time.Now().After(end) {
			s.Stop(syscall.SIGKILL)
			return nil, fmt.Errorf("sidroot: the server in %s (%s) was not ready in two minutes: %s", root, how, s.out.tail())
		}
	}
}

// mainPID is the server's main process as we see it, 0 until known: the
// chroot command's (which execs it), or the container's first process
// (podman inspect; chroot execs it there too).
func (s *Server) mainPID() int {
	if s.How == Chroot {
		return s.cmd.Process.Pid
	}
	out, err := exec.Command("podman", "--runtime=runc", "inspect", "--format", "{{.State.Pid}}", s.name).Output()
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return pid
}

// PID is the server's main process (PostgreSQL's postmaster, mysqld), as
// we see it.
func (s *Server) PID() int { return s.pid }

// HostPath is a path of the server's (in its root) as we see it.
func (s *Server) HostPath(p string) string { return filepath.Join(s.Root, p) }

// Output is what the server wrote on its standard output and error.
func (s *Server) Output() string { return s.out.String() }

// Stop ends the server with sig (its fast shutdown), SIGKILL after a
// minute, removes its container and its directory. Calling it again does
// nothing.
func (s *Server) Stop(sig syscall.Signal) {
	s.stopped.Do(func() {
		if s.pid != 0 {
			syscall.Kill(s.pid, sig)
		}
		select {
		case <-s.exited:
		case <-time.After(time.Minute):
			if s.pid != 0 {
				syscall.Kill(s.pid, syscall.SIGKILL)
			}
			s.cmd.Process.Kill()
			<-s.exited
		}
		if s.name != "" {
			exec.Command("podman", "--runtime=runc", "rm", "--force", "--ignore", s.name).Run()
		}
		os.RemoveAll(s.HostPath(s.Dir))
	})
}

// limits are the container's resource limits: ours. Podman's defaults
// are above what a root without CAP_SYS_RESOURCE may set (as in this
// machine's sandbox); a pod has its runtime's.
func limits() []string {
	var files, procs unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &files)
	unix.Getrlimit(unix.RLIMIT_NPROC, &procs)
	nproc := min(procs.Max, 32768)
	return []string{fmt.Sprintf("--ulimit=nofile=%d:%d", files.Max, files.Max), fmt.Sprintf("--ulimit=nproc=%d:%d", nproc, nproc)}
}

// lockedLog keeps a server's output and copies it to the caller's log.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
	w  io.Writer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if l.w != nil {
		l.w.Write(p)
	}
	return len(p), nil
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tail is the output's last lines, for an error.
func (l *lockedLog) tail() string {
	lines := strings.Split(strings.TrimSpace(l.String()), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
