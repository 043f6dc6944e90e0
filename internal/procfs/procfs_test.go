package procfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestPath(t *testing.T) {
	if got, want := Path(12, "task", 34, "syscall"), "/proc/12/task/34/syscall"; got != want {
		t.Errorf("Path = %q, want %q", got, want)
	}
	if got := Path(os.Getpid()); got != "/proc/"+strconv.Itoa(os.Getpid()) {
		t.Errorf("Path(self) = %q", got)
	}
}

func TestPIDs(t *testing.T) {
	pids, err := PIDs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pids, os.Getpid()) || !slices.Contains(pids, 1) || !slices.IsSorted(pids) {
		t.Errorf("PIDs = %v: want sorted, with 1 and %d", pids, os.Getpid())
	}
}

func TestTasks(t *testing.T) {
	tids, err := Tasks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// The Go runtime runs several threads; the first is the process's own PID.
	if !slices.Contains(tids, os.Getpid()) || !slices.Contains(tids, unix.Gettid()) || !slices.IsSorted(tids) {
		t.Errorf("Tasks = %v: want sorted, with %d and %d", tids, os.Getpid(), unix.Gettid())
	}
}

func TestFDs(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fds, err := FDs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(fds, int(f.Fd())) || !slices.Contains(fds, 0) {
		t.Errorf("FDs = %v: want 0 and %d", fds, f.Fd())
	}
	if link, err := os.Readlink(Path(os.Getpid(), "fd", f.Fd())); err != nil || link != os.DevNull {
		t.Errorf("fd %d links to %q, %v", f.Fd(), link, err)
	}
}

func TestStatus(t *testing.T) {
	pid := os.Getpid()
	if got, err := PPid(pid); err != nil || got != os.Getppid() {
		t.Errorf("PPid = %d, %v; want %d", got, err, os.Getppid())
	}
	if got, err := Tgid(unix.Gettid()); err != nil || got != pid {
		t.Errorf("Tgid(%d) = %d, %v; want %d", unix.Gettid(), got, err, pid)
	}
	if got, err := Status(pid, "Pid"); err != nil || got != strconv.Itoa(pid) {
		t.Errorf("Status(Pid) = %q, %v", got, err)
	}
	if _, err := Status(pid, "NoSuchField"); err == nil {
		t.Error("Status(NoSuchField) has no error")
	}
}

func TestComm(t *testing.T) {
	want := filepath.Base(os.Args[0])
	if len(want) > 15 { // TASK_COMM_LEN, NUL included
		want = want[:15]
	}
	if got := Comm(os.Getpid()); got != want {
		t.Errorf("Comm = %q, want %q", got, want)
	}
}

func TestCmdline(t *testing.T) {
	if got, err := Cmdline(os.Getpid()); err != nil || !slices.Equal(got, os.Args) {
		t.Errorf("Cmdline = %q, %v; want %q", got, err, os.Args)
	}
}

func TestExe(t *testing.T) {
	want, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Exe(os.Getpid()); err != nil || got != want {
		t.Errorf("Exe = %q, %v; want %q", got, err, want)
	}
}

func TestMaps(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(exe, &st); err != nil {
		t.Fatal(err)
	}
	maps, err := Maps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var text, stack bool
	for _, m := range maps {
		if m.Path == exe && m.Perms == "r-xp" && m.Inode == st.Ino && m.Dev == st.Dev && m.Lo < m.Hi {
			text = true
		}
		if m.Path == "[stack]" && m.Perms == "rw-p" && m.Inode == 0 {
			stack = true
		}
	}
	if !text || !stack {
		t.Errorf("Maps: the executable's code mapped: %v, the main stack: %v, in %+v", text, stack, maps)
	}
}

func TestExeName(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got := ExeName(os.Getpid()); got != filepath.Base(exe) {
		t.Errorf("ExeName = %q, want %q", got, filepath.Base(exe))
	}
	if got := ExeName(-1); got != "" {
		t.Errorf("ExeName(-1) = %q", got)
	}
}

func TestTopmost(t *testing.T) {
	self, parent := os.Getpid(), os.Getppid()
	if got := Topmost(self, func(int) bool { return false }); got != self {
		t.Errorf("Topmost, no parent alike = %d, want %d", got, self)
	}
	if parent <= 1 {
		t.Skip("the test's parent is init")
	}
	if got := Topmost(self, func(p int) bool { return p == parent }); got != parent {
		t.Errorf("Topmost, the parent alike = %d, want %d", got, parent)
	}
	if got := Topmost(self, func(int) bool { return true }); got <= 1 {
		t.Errorf("Topmost, all alike = %d, want a process below init", got)
	}
}

func TestExeReadable(t *testing.T) {
	if err := ExeReadable(os.Getpid()); err != nil {
		t.Errorf("ExeReadable(self) = %v", err)
	}
}

func TestStartOf(t *testing.T) {
	me, ok := StartOf(os.Getpid())
	if !ok || me.Ticks == 0 || me.Zombie {
		t.Fatalf("StartOf(self) = %+v, %v", me, ok)
	}
	if again, _ := StartOf(os.Getpid()); again != me {
		t.Errorf("StartOf(self) changed: %+v, then %+v", me, again)
	}
	if init, _ := StartOf(1); init.Ticks > me.Ticks {
		t.Errorf("init started after us: %d > %d", init.Ticks, me.Ticks)
	}
	if _, ok := StartOf(1 << 30); ok {
		t.Error("StartOf a PID that cannot exist says it runs")
	}
}

// Programs names a new process at once, follows a young one's exec in
// place, keeps an older one's name until its recheck, and drops a process
// once it is gone.
func TestPrograms(t *testing.T) {
	if _, err := Programs(); err != nil { // the first call: what runs already is not young
		t.Fatal(err)
	}
	child := exec.Command("sh", "-c", "read x; exec sleep 30")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	pid := child.Process.Pid
	shell := ExeName(pid)
	if names, err := Programs(); err != nil || names[pid] != shell || shell == "" {
		t.Fatalf("a new process: named %q (err %v), its executable %q", names[pid], err, shell)
	}
	stdin.Write([]byte("\n")) // the shell execs sleep, keeping its pid
	var names map[int]string
	if !eventually(func() bool { names, _ = Programs(); return names[pid] == "sleep" }) {
		t.Errorf("a young process that exec'd sleep is still named %q", names[pid])
	}

	self := os.Getpid()
	age := func(seen, read time.Duration) {
		programs.Lock()
		programs.known[self] = program{name: "kept", seen: time.Now().Add(-seen), read: time.Now().Add(-read)}
		programs.Unlock()
	}
	age(2*programRecheck, time.Second)
	if names, _ := Programs(); names[self] != "kept" {
		t.Errorf("an older process read a second ago: named %q, not the name kept", names[self])
	}
	age(2*programRecheck, programRecheck+time.Second)
	if names, _ := Programs(); names[self] != ExeName(self) {
		t.Errorf("an older process read %v ago: named %q, not read again (%q)", programRecheck+time.Second, names[self], ExeName(self))
	}

	child.Process.Kill()
	child.Wait()
	names, _ = Programs()
	if name, listed := names[pid]; listed {
		t.Errorf("process %d is gone, yet listed as %q", pid, name)
	}
}

// eventually polls cond for up to 10 s.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}
