package mysandbox

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/sandbox"
)

// A server restarted, cleanly and then killed with SIGKILL, comes back as
// a new process on the same data directory (a committed row is still
// there), socket, port and settings; the old process is gone; Stop then
// stops the new one and leaves nothing behind.
func TestRestart(t *testing.T) {
	t.Parallel()
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := startForTest(t, Options{Port: port, Settings: map[string]string{"innodb_buffer_pool_size": "64M"}})
	ctx := testContext(t)
	if _, err := s.SQL(ctx, "", "CREATE DATABASE r; CREATE TABLE r.t (id INT PRIMARY KEY) ENGINE=InnoDB; INSERT INTO r.t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	want := "67108864\t" + strconv.Itoa(port) + "\t" + s.DataDir + "/\t" + s.Socket
	pids := []int{s.PID()}
	for i, kill := range []bool{false, true} {
		old := s.PID()
		if err := s.Restart(ctx, kill); err != nil {
			t.Fatalf("Restart(kill %v): %v", kill, err)
		}
		pid := s.PID()
		pids = append(pids, pid)
		if pid == old {
			t.Errorf("Restart(kill %v): PID() is still %d", kill, old)
		}
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(old) + "/exe"); err == nil {
			t.Errorf("Restart(kill %v) left the old server, pid %d, running %s", kill, old, exe)
		}
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err != nil || filepath.Base(exe) != "mariadbd" {
			t.Errorf("after Restart(kill %v), PID() = %d runs %q (%v), want mariadbd", kill, pid, exe, err)
		}
		if b, err := os.ReadFile(filepath.Join(s.Dir, "mariadbd.pid")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
			t.Errorf("after Restart(kill %v), mariadbd.pid holds %q (%v), want %d", kill, b, err, pid)
		}
		out, err := s.SQL(ctx, "", "SELECT @@innodb_buffer_pool_size, @@port, @@datadir, @@socket")
		if err != nil || out != want {
			t.Errorf("after Restart(kill %v), settings %q (%v), want %q", kill, out, err, want)
		}
		if _, err := s.SQL(ctx, "", "INSERT INTO r.t VALUES ("+strconv.Itoa(i+2)+")"); err != nil {
			t.Fatal(err)
		}
		if out, err := s.SQL(ctx, "", "SELECT COUNT(*) FROM r.t"); err != nil || out != strconv.Itoa(i+2) {
			t.Errorf("after Restart(kill %v), the table holds %q rows (%v), want %d", kill, out, err, i+2)
		}
	}
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Errorf("after the restarts, nothing listens on port %d: %v", port, err)
	} else {
		c.Close()
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil {
			t.Errorf("Stop left pid %d running %s", pid, exe)
		}
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("Stop left %s: %v", s.Dir, err)
	}
	if err := s.Restart(ctx, false); err == nil {
		t.Error("Restart after Stop succeeded")
	}
}
