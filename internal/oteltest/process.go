// Package oteltest starts the real OpenTelemetry components a test sends
// to: an OpenTelemetry Collector (StartCollector), writing what it
// receives to files the test reads back as OTLP, and Jaeger
// (StartJaeger), whose query API returns a trace's spans and their
// parents. Each runs from the repository's .tools (make test builds them:
// make .tools/otelcol .tools/jaeger) on free loopback ports, with its
// config and log in the test's temporary directory, and stops at the
// test's cleanup. A tool that is missing skips the test, or fails it when
// CI=true; one that does not start fails it with its log's tail.
package oteltest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/sandbox"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// startTimeout is how long a component may take to listen: generous, as
// the machine may be busy with another test suite.
const startTimeout = 60 * time.Second

// Tool is the path of .tools/name, a program make test builds there
// ("otelcol", "jaeger"). Missing, it skips the test, or fails it when
// CI=true: CI must run every test.
func Tool(t testing.TB, name string) string {
	t.Helper()
	testenv.NotShort(t)
	bin := filepath.Join(testenv.Root(), ".tools", name)
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing: make test builds it (make .tools/%s)", bin, name)
		}
		t.Skipf("%s is missing: make .tools/%s builds it", bin, name)
	}
	return bin
}

// freePort is a loopback TCP port nothing listens on now
// (sandbox.FreePort).
func freePort(t testing.TB) int {
	t.Helper()
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// loopback is 127.0.0.1:port.
func loopback(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// listening says whether something accepts TCP connections at addr.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// process is one run of a component: its command line, its log (stdout
// and stderr) and whether it has exited.
type process struct {
	name    string // "collector", "jaeger": begins every message
	args    []string
	logFile string
	kill    bool // stop with SIGKILL: nothing to flush, and a graceful stop is slow
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	err     error         // its exit status, once exited is closed
}

// start runs the process, appending to its log, and waits until ready
// says it serves; a process that exits first, or is not ready in time,
// fails the test with its log's tail.
func (p *process) start(t testing.TB, ready func() bool) {
	t.Helper()
	log, err := os.OpenFile(p.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close() // the child has its own descriptor
	p.cmd = exec.Command(p.args[0], p.args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	p.exited = make(chan struct{})
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	deadline := time.Now().Add(startTimeout)
	for !ready() {
		select {
		case <-p.exited:
			t.Fatalf("%s exited before it served (%v):\n%s", p.name, p.err, p.tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			t.Fatalf("%s did not serve within %s:\n%s", p.name, startTimeout, p.tail())
		}
	}
}

// stop asks the process to shut down (SIGTERM: a Collector flushes its
// exporters then; SIGKILL if p.kill), kills it if it has not within 30 s,
// and returns how it had ended if it ended on its own before: a crash the
// test must hear of. Stopping a stopped process does nothing.
func (p *process) stop() error {
	if p.cmd == nil {
		return nil
	}
	defer func() { p.cmd = nil }()
	select {
	case <-p.exited:
		return fmt.Errorf("%s had exited (%v):\n%s", p.name, p.err, p.tail())
	default:
	}
	var sig os.Signal = syscall.SIGTERM
	if p.kill {
		sig = os.Kill
	}
	cmdrun.Stop(p.cmd.Process, sig, p.exited, 30*time.Second)
	return nil
}

// tail is the end of the process's log.
func (p *process) tail() string {
	return cmdrun.LogTail(p.logFile, 30)
}
