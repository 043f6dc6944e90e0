package storage

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

// Two bindfs mounts, each named by its daemon's arguments only relatively
// ("mnt"): Under tells their daemons apart by the connection each serves.
func TestUnderFindsTheDaemonOfItsMount(t *testing.T) {
	testenv.NeedRoot(t)
	if _, err := exec.LookPath("bindfs"); err != nil {
		t.Fatal("bindfs is not installed (make deps installs it)")
	}
	var mounts [2]string
	for i := range mounts {
		dir := t.TempDir()
		os.Mkdir(filepath.Join(dir, "src"), 0o755)
		os.Mkdir(filepath.Join(dir, "mnt"), 0o755)
		cmd := exec.Command("bindfs", "src", "mnt")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("bindfs: %v: %s", err, out)
		}
		mounts[i] = filepath.Join(dir, "mnt")
		t.Cleanup(func() { exec.Command("umount", mounts[i]).Run() })
	}
	var pids [2]int
	for i, m := range mounts {
		es, err := Under(m)
		if err != nil || len(es) != 1 || es[0].Name != "bindfs" || es[0].Mount != m {
			t.Fatalf("Under(%s) = %v, %v; want its one bindfs", m, es, err)
		}
		pids[i] = es[0].PID
	}
	if pids[0] == pids[1] {
		t.Errorf("both mounts said to be served by pid %d", pids[0])
	}
	if es, err := Under(t.TempDir()); err != nil || es != nil {
		t.Errorf("a directory on the disk: %v, %v", es, err)
	}
}
