// Package loadgen is a synthetic database for measuring dbiolat itself: a
// backend process that speaks just enough of PostgreSQL's protocol (it
// answers each simple Query with a ReadyForQuery) and a client that sends
// it queries at a chosen rate. A known number of queries then passes
// through the probes, at rates a real server on the same machine cannot
// reach, so tests and the capacity benchmark can check that what dbiolat
// delivered plus what it counted as dropped is exactly what was sent.
package loadgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// backendEnv marks the process started as the backend.
const backendEnv = "DBIOLAT_LOADGEN_BACKEND"

// ServeIfBackend turns this process into the backend when it was started
// as one, and exits when the client hangs up. Programs that start backends
// (a benchmark's main, a test's TestMain) call it first thing.
func ServeIfBackend() {
	if os.Getenv(backendEnv) == "" {
		return
	}
	if err := serve(os.NewFile(3, "client")); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen backend:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

var readyForQuery = []byte{'Z', 0, 0, 0, 5, 'I'}

// serve answers every Query with a ReadyForQuery, one send each, as a
// backend flushes after each query; it reads whatever has arrived, so a
// client that sends several queries at once pipelines them. A query
// "IOURING <path>" reads the file through io_uring first.
func serve(conn *os.File) error {
	// One thread: the kernel side keeps a backend's protocol state per thread.
	runtime.LockOSThread()
	buf := make([]byte, 64<<10)
	have := 0
	for {
		n, err := conn.Read(buf[have:])
		if n == 0 || errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		have += n
		off := 0
		for have-off >= 5 {
			size := 1 + int(binary.BigEndian.Uint32(buf[off+1:]))
			if have-off < size {
				break
			}
			if buf[off] == 'X' {
				return nil
			}
			if path, ok := strings.CutPrefix(string(buf[off+5:off+size-1]), ioUringQuery); ok && buf[off] == 'Q' {
				if _, err := readWithIOUring(path); err != nil {
					return err
				}
			}
			if _, err := conn.Write(readyForQuery); err != nil {
				return err
			}
			off += size
		}
		have = copy(buf, buf[off:have])
	}
}

// Backend is a running backend process and the client's end of its socket.
type Backend struct {
	cmd  *exec.Cmd
	conn *os.File
}

// Start starts a backend: this program again, as a child, with one end of
// a unix socket pair.
func Start() (*Backend, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, fmt.Errorf("creating the backend's socket: %w", err)
	}
	conn, theirs := os.NewFile(uintptr(fds[0]), "backend"), os.NewFile(uintptr(fds[1]), "client")
	defer theirs.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), backendEnv+"=1")
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("starting the backend: %w", err)
	}
	return &Backend{cmd: cmd, conn: conn}, nil
}

// PID is the backend's process id.
func (b *Backend) PID() int { return b.cmd.Process.Pid }

// query is one simple Query message.
var query = queryMessage("SELECT 1;")

// ioUringQuery starts the query that makes the backend read a file
// through io_uring: "IOURING /path".
const ioUringQuery = "IOURING "

func queryMessage(text string) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{'Q'}, uint32(4+len(text)+1)), text+"\x00"...)
}

// ReadWithIOUring has the backend read a file through io_uring, performed
// by its io-wq worker thread, in one query; it returns once answered.
func (b *Backend) ReadWithIOUring(path string) error {
	if _, err := b.conn.Write(queryMessage(ioUringQuery + path)); err != nil {
		return err
	}
	_, err := io.ReadFull(b.conn, make([]byte, len(readyForQuery)))
	return err
}

// Run sends n queries in batches of batch (sent in one write: the backend
// reads them at once and answers them one by one, as pipelined queries),
// at rate queries a second (0: as fast as the backend answers), and waits
// for every answer. It returns how long that took.
func (b *Backend) Run(n, rate, batch int) (time.Duration, error) {
	if batch < 1 {
		batch = 1
	}
	msgs := make([]byte, 0, batch*len(query))
	for i := 0; i < batch; i++ {
		msgs = append(msgs, query...)
	}
	answers := make([]byte, batch*len(readyForQuery))
	start := time.Now()
	for sent := 0; sent < n; {
		k := min(batch, n-sent)
		if _, err := b.conn.Write(msgs[:k*len(query)]); err != nil {
			return 0, fmt.Errorf("sending queries: %w", err)
		}
		if _, err := io.ReadFull(b.conn, answers[:k*len(readyForQuery)]); err != nil {
			return 0, fmt.Errorf("reading answers: %w", err)
		}
		sent += k
		if rate > 0 { // on schedule: sleep off any lead
			if ahead := time.Duration(float64(sent)/float64(rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
	return time.Since(start), nil
}

// Close hangs up and waits for the backend to exit.
func (b *Backend) Close() error {
	b.conn.Write([]byte{'X', 0, 0, 0, 4})
	b.conn.Close()
	return b.cmd.Wait()
}
