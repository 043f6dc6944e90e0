// Package sandbox is what the throwaway servers of pgsandbox (PostgreSQL)
// and mysandbox (MariaDB) share: a private directory holding the server's
// socket and log, the log's tail in the error of a start that failed, and
// a Stop that runs once, shows the log and removes the directory. How a
// server is started and stopped is each package's own.
package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
)

// Dir is a sandbox's private directory, its server's log in it, and
// where the sandbox reports what it does.
type Dir struct {
	Name    string    // "pgsandbox", "mysandbox": begins every message and error
	Path    string    // the directory (mode 0700), removed by Stop
	LogFile string    // the server's log, in Path
	Log     io.Writer // progress messages, and the server's log at Stop; io.Discard for none

	stopOnce sync.Once
	stopErr  error
}

// New creates a fresh directory name-* under parent ("" = os.TempDir()),
// after check, if not nil, has accepted parent (made absolute); logName
// is the server's log in it; log nil discards messages.
func New(name, parent, logName string, log io.Writer, check func(parent string) error) (*Dir, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	parent, err := filepath.Abs(parent)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if check != nil {
		if err := check(parent); err != nil {
			return nil, err
		}
	}
	d := &Dir{Name: name, Log: log}
	if d.Log == nil {
		d.Log = io.Discard
	}
	if d.Path, err = os.MkdirTemp(parent, name+"-"); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	d.LogFile = filepath.Join(d.Path, logName)
	return d, nil
}

// CheckSocket says whether a unix socket's path fits in sockaddr_un.sun_path (107 bytes and a NUL).
func (d *Dir) CheckSocket(path string) error {
	if len(path) > 107 {
		return fmt.Errorf("%s: socket path %s is longer than 107 bytes; use a shorter Dir", d.Name, path)
	}
	return nil
}

// StartFailed adds the tail of the server's log to err, a start's failure.
func (d *Dir) StartFailed(err error) error {
	if tail := cmdrun.LogTail(d.LogFile, 20); tail != "" {
		return fmt.Errorf("%w\nserver log tail:\n%s", err, tail)
	}
	return err
}

// Stop runs stop, which stops the server and says what went wrong, copies
// the server's log to Log and removes the directory. Calling it again
// returns the first result, so it can be both deferred (or registered
// with t.Cleanup) and called explicitly.
func (d *Dir) Stop(stop func() []error) error {
	d.stopOnce.Do(func() {
		errs := stop()
		if d.Log != io.Discard {
			if f, err := os.Open(d.LogFile); err == nil {
				fmt.Fprintf(d.Log, "%s: server log %s:\n", d.Name, d.LogFile)
				io.Copy(d.Log, f)
				f.Close()
			}
		}
		if err := os.RemoveAll(d.Path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.Name, err))
		}
		d.stopErr = errors.Join(errs...)
	})
	return d.stopErr
}
