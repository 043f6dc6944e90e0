package mysandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
)

// Restart stops the server and starts it again on the same data
// directory, socket, port and settings (the very command line it ran
// with), and returns once the new server answers on its socket; PID then
// gives the new server's pid. kill false shuts it down cleanly
// (mariadb-admin shutdown: SIGKILL if it has not exited within ctx or a
// minute); kill true sends SIGKILL at once, as a crash or an OOM kill
// would, and InnoDB recovers from its redo log when it starts again.
// Either way Restart waits for the old process to be gone before it
// starts the new one. A server that had already exited is only started.
//
// Unlike the server's other methods, Restart must not run concurrently
// with them: it replaces the process they read.
func (s *Server) Restart(ctx context.Context, kill bool) error {
	if s.cmd == nil || s.exited == nil {
		return errors.New("mysandbox: Restart of a server that was never started")
	}
	if _, err := os.Stat(s.Dir); err != nil {
		return fmt.Errorf("mysandbox: Restart after Stop: %w", err)
	}
	old := s.cmd.Process.Pid
	select {
	case <-s.exited:
		fmt.Fprintf(s.box.Log, "mysandbox: mariadbd pid %d had exited (%v): starting it again\n", old, s.waitErr)
	default:
		if err := s.halt(ctx, kill); err != nil {
			return err
		}
	}
	path, args := s.cmd.Path, s.cmd.Args[1:]
	out, err := os.OpenFile(s.box.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("mysandbox: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(path, args...)
	cmd.Dir, cmd.Env = s.cmd.Dir, s.cmd.Env
	cmd.Stdout, cmd.Stderr = out, out
	fmt.Fprintf(s.box.Log, "mysandbox: restarting: %s %s\n", path, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mysandbox: starting mariadbd again: %w", err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited, s.waitErr = cmd, exited, nil
	go func() {
		err := cmd.Wait()
		s.waitErr = err
		close(exited)
	}()
	if err := s.waitAnswering(ctx); err != nil {
		return s.box.StartFailed(err)
	}
	fmt.Fprintf(s.box.Log, "mysandbox: mariadbd pid %d restarted as pid %d\n", old, s.PID())
	return nil
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
		return fmt.Errorf("mysandbox: mariadbd did not shut down in time and was killed (shutdown: %v)", err)
	}
}

// waitAnswering waits until the server answers on its socket, for at
// most a minute.
func (s *Server) waitAnswering(ctx context.Context) error {
	ping, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	exited := s.exited
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
			return nil
		}
	}
}
