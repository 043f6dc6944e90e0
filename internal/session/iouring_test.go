package session

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// A read queued to io_uring and performed by the kernel's io-wq worker
// thread (iou-wrk-PID, created without a fork tracepoint) is the query's
// that queued it: its block requests are charged there, not to "another
// process". PostgreSQL 18 with io_method=io_uring reads this way (the
// registry's builds have no liburing: the synthetic backend does it).
func TestIOUringWorkerReadIsTheQuerys(t *testing.T) {
	testenv.NeedRoot(t)
	file := filepath.Join(t.TempDir(), "data")
	const size = 8 << 20
	if err := os.WriteFile(file, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	exec.Command("sync").Run()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		t.Fatal(err)
	}
	b, s := tracedBackend(t, probe.PGWire|probe.Block|probe.Sched)
	if err := b.ReadWithIOUring(file); err != nil {
		t.Fatal(err)
	}
	workers := ioWorkers(t, b.PID())
	var queries []*model.Query
	if err := s.Poll(time.Now().Add(100*time.Millisecond), func(q *model.Query) { queries = append(queries, q) }, nil); err != nil {
		t.Fatal(err)
	}
	var q *model.Query
	for _, x := range queries {
		if strings.HasPrefix(x.Query, "IOURING") {
			q = x
		}
	}
	if q == nil {
		t.Fatalf("no record of the query, among %d", len(queries))
	}
	t.Logf("io_uring read of %d bytes by %v: the query has %d block requests, %d bytes", size, workers, q.BlkReadCount, q.BlkBytes)
	if len(workers) == 0 {
		t.Fatalf("no io-wq worker thread read the file: the test tested nothing")
	}
	if q.BlkBytes < size*9/10 {
		t.Errorf("the query was charged %d block bytes for a %d-byte cold read done for it", q.BlkBytes, size)
	}
}

// ioWorkers lists a process's io_uring worker threads by name.
func ioWorkers(t *testing.T, pid int) []string {
	t.Helper()
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "comm"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range tasks {
		if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), "iou-wrk-") {
			out = append(out, strings.TrimSpace(string(b)))
		}
	}
	return out
}
