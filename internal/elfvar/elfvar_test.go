package elfvar

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// marker is a program that prints where its global variable lives, then
// waits: built position-independent, so it loads at an address of the
// kernel's choosing, as PostgreSQL's distributions' servers are.
const marker = `package main

import (
	"fmt"
	"os"
	"unsafe"
)

var Marker = [4]uint64{1, 2, 3, 4}

func main() {
	fmt.Printf("%d\n", uintptr(unsafe.Pointer(&Marker)))
	os.Stdin.Read(make([]byte, 1))
}
`

// The address found for a running process's variable is the one the
// process itself has for it, through /proc/PID/exe as dbiolat reads it.
func TestAddressInARunningProcess(t *testing.T) {
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "main.go"), filepath.Join(dir, "marker")
	if err := os.WriteFile(src, []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-buildmode=pie", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("building the marker: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	want, err := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	exe := fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid)
	got, err := Address(cmd.Process.Pid, exe, "main.Marker")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("address %#x, the process says %#x", got, want)
	}
	if _, err := Address(cmd.Process.Pid, exe, "main.NoSuchVariable"); !errors.Is(err, ErrNoSymbol) {
		t.Errorf("a missing symbol: %v", err)
	}
}

// A process's libraries are found by name, through its root.
func TestLibrary(t *testing.T) {
	sleep := exec.Command("sleep", "5") // a dynamically linked program: it maps libc
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleep.Process.Kill()
	pid := sleep.Process.Pid
	var libc string
	for i := 0; i < 100 && libc == ""; i++ { // until the loader has mapped it
		var err error
		if libc, err = Library(pid, "libc.so"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(libc); err != nil || !strings.HasPrefix(libc, fmt.Sprintf("/proc/%d/root/", pid)) {
		t.Errorf("libc at %q: %v", libc, err)
	}
	if none, err := Library(pid, "libnosuchlibrary.so"); none != "" || err != nil {
		t.Errorf("a library not mapped: %q, %v", none, err)
	}
}
