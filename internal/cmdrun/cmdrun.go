// Package cmdrun runs the programs the throwaway servers need (initdb,
// pgbench, mariadb-install-db, sysbench...) so that a failure reads as
// one sentence: which command, and what it (or the server's log) said.
package cmdrun

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Run runs cmd and returns its stdout; the error names the command (after
// prefix, the caller's package) and includes its stderr, or its stdout when
// stderr is empty. If log is non-nil, stdout and stderr are copied there too.
func Run(cmd *exec.Cmd, log io.Writer, prefix string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if log != nil {
		cmd.Stdout = io.MultiWriter(&stdout, log)
		cmd.Stderr = io.MultiWriter(&stderr, log)
	}
	cmd.WaitDelay = 5 * time.Second // a child holding the pipes open does not hang the caller
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		err = fmt.Errorf("%s: %s %s: %w: %s", prefix, filepath.Base(cmd.Path), strings.Join(cmd.Args[1:], " "), err, msg)
	}
	return stdout.String(), err
}

// LogTail is the last n lines of a server's log file, for an error that
// says why the server did not start; "" if it cannot be read.
func LogTail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop ends a started program: sig, then SIGKILL if it has not exited
// (exited delivers or is closed) within grace.
func Stop[T any](p *os.Process, sig os.Signal, exited <-chan T, grace time.Duration) {
	p.Signal(sig)
	select {
	case <-exited:
	case <-time.After(grace):
		p.Kill()
		<-exited
	}
}
