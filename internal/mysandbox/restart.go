package mysandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
	cmd := exec.Command(s.cmd.Path, s.cmd.Args[1:]...) // the very command line it ran with
	cmd.Dir, cmd.Env = s.cmd.Dir, s.cmd.Env
	if err := s.run(ctx, cmd); err != nil {
		return s.box.StartFailed(err)
	}
	fmt.Fprintf(s.box.Log, "mysandbox: mariadbd pid %d restarted as pid %d\n", old, s.PID())
	return nil
}
