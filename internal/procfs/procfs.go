// Package procfs reads what dbiolat needs of /proc: the processes, their
// threads, descriptors and memory maps, and a few fields of their status.
// It knows no database. Each function reads the file anew (Programs
// keeps what it read a while); a process that has exited gives an error,
// or the zero value where the doc says so.
package procfs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Root is where the kernel shows processes.
const Root = "/proc"

// Path is /proc/PID followed by parts (names or numbers), joined by slashes.
func Path(pid int, parts ...any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d", Root, pid)
	for _, p := range parts {
		fmt.Fprintf(&b, "/%v", p)
	}
	return b.String()
}

// PIDs lists the processes (not their other threads) in increasing order.
func PIDs() ([]int, error) {
	ids, err := numbered(Root)
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	return ids, nil
}

// Tasks lists a process's thread ids in increasing order, its own PID among them.
func Tasks(pid int) ([]int, error) { return numbered(Path(pid, "task")) }

// FDs lists a process's open file descriptors in increasing order.
func FDs(pid int) ([]int, error) { return numbered(Path(pid, "fd")) }

// numbered lists the entries of a directory whose names are numbers, sorted.
func numbered(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Status is the value of one field of /proc/PID/status ("PPid", "NSpid"), trimmed.
func Status(pid int, field string) (string, error) {
	f, err := os.Open(Path(pid, "status"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no %s in %s", field, Path(pid, "status"))
}

// statusInt is a numeric field of /proc/PID/status.
func statusInt(pid int, field string) (int, error) {
	v, err := Status(pid, field)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(v)
}

// PPid is a process's parent's PID.
func PPid(pid int) (int, error) { return statusInt(pid, "PPid") }

// Tgid is the process a thread id belongs to (a process's own PID for a process).
func Tgid(pid int) (int, error) { return statusInt(pid, "Tgid") }

// Start is when a process started, in clock ticks since boot: a PID
// reused by another process has another; Zombie says it has exited,
// not yet reaped.
type Start struct {
	Ticks  uint64
	Zombie bool
}

// StartOf reads a process's Start from /proc/PID/stat: its state is the
// field after the command's closing parenthesis, its start time the
// 20th after that. False if the process is gone.
func StartOf(pid int) (Start, bool) {
	b, err := os.ReadFile(Path(pid, "stat"))
	i := strings.LastIndexByte(string(b), ')')
	if err != nil || i < 0 {
		return Start{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return Start{}, false
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	return Start{ticks, f[0] == "Z"}, err == nil
}

// Comm is a process's command name, "" if it cannot be read.
func Comm(pid int) string {
	b, _ := os.ReadFile(Path(pid, "comm"))
	return strings.TrimSpace(string(b))
}

// Cmdline is a process's arguments (its title, for a process that rewrote them); none for a kernel thread.
func Cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(Path(pid, "cmdline"))
	if s := strings.TrimRight(string(b), "\x00"); err == nil && s != "" {
		return strings.Split(s, "\x00"), nil
	}
	return nil, err
}

// Exe is the path of the executable a process runs, as the kernel resolves it (with " (deleted)" once replaced).
func Exe(pid int) (string, error) { return os.Readlink(Path(pid, "exe")) }

// ExeReadable is nil if this process may see which program pid runs, else an error that says how it could.
func ExeReadable(pid int) error {
	if _, err := Exe(pid); errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("cannot see which program process %d runs (it belongs to another user): give dbiolat CAP_SYS_PTRACE, or run it as that user or as root", pid)
	}
	return nil
}

// ExeName is the file name of the executable a process runs, without " (deleted)"; "" if it cannot be read.
func ExeName(pid int) string {
	exe, err := Exe(pid)
	if err != nil {
		return ""
	}
	return filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
}

// Programs is the file name of every running process's executable
// (ExeName: "" for a kernel thread or one that cannot be read), by pid,
// for the searches that look at every process each second (servers and
// poolers that start). A process's name is read at every call while the
// process is young (listed first less than programRecheck ago, after the
// first call: it may exec another program in place, keeping its pid, as
// a shell's `exec postgres` or an entrypoint script's `exec pgbouncer`
// do), then every programRecheck: a call costs the listing of /proc and a
// few reads, not one per process (serve, idle, beside 85 processes: 16
// reads a second, not 133).
func Programs() (map[int]string, error) {
	pids, err := PIDs()
	if err != nil {
		return nil, err
	}
	programs.Lock()
	defer programs.Unlock()
	now := time.Now()
	known := make(map[int]program, len(pids)) // those gone are dropped
	names := make(map[int]string, len(pids))
	for _, pid := range pids {
		p, ok := programs.known[pid]
		if !ok && programs.known != nil { // (those of the first call are not young: they ran before)
			p.seen = now
		}
		if !ok || now.Sub(p.seen) < programRecheck || now.Sub(p.read) >= programRecheck {
			p.name, p.read = ExeName(pid), now
		}
		known[pid], names[pid] = p, p.name
	}
	programs.known = known
	return names, nil
}

const programRecheck = 10 * time.Second

// program is a process's executable's name as Programs read it: when
// the process was first listed, and when its name was last read.
type program struct {
	name       string
	seen, read time.Time
}

var programs struct {
	sync.Mutex
	known map[int]program
}

// Topmost climbs from pid to its parent while the parent is not init and is like (a server's child to the server).
func Topmost(pid int, like func(pid int) bool) int {
	for {
		p, err := PPid(pid)
		if err != nil || p <= 1 || !like(p) {
			return pid
		}
		pid = p
	}
}

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Lo, Hi uint64 // the addresses it spans, Hi excluded
	Perms  string // "r-xp"
	Offset uint64 // in the file
	Dev    uint64 // the file's device, as unix.Mkdev makes it
	Inode  uint64
	Path   string // the file, or "[heap]", "[stack]"...; "" when anonymous
}

// Maps reads a process's memory mappings.
func Maps(pid int) ([]Mapping, error) {
	f, err := os.Open(Path(pid, "maps"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := parseMapping(sc.Text()); ok {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// parseMapping reads one line of maps: "start-end perms offset
// major:minor inode", then, after padding, the path, which is the rest of
// the line: a path may hold spaces (a root's directory named so), and ends
// in " (deleted)" when the file was removed or replaced since it was mapped.
func parseMapping(line string) (Mapping, bool) {
	var fl [5]string
	rest := line
	for i := range fl {
		rest = strings.TrimLeft(rest, " ")
		end := strings.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		fl[i], rest = rest[:end], rest[end:]
		if fl[i] == "" {
			return Mapping{}, false
		}
	}
	lo, hi, _ := strings.Cut(fl[0], "-")
	major, minor, _ := strings.Cut(fl[3], ":")
	m := Mapping{Perms: fl[1], Path: strings.TrimLeft(rest, " ")}
	m.Lo, _ = strconv.ParseUint(lo, 16, 64)
	m.Hi, _ = strconv.ParseUint(hi, 16, 64)
	m.Offset, _ = strconv.ParseUint(fl[2], 16, 64)
	maj, _ := strconv.ParseUint(major, 16, 32)
	mnr, _ := strconv.ParseUint(minor, 16, 32)
	m.Dev = unix.Mkdev(uint32(maj), uint32(mnr))
	m.Inode, _ = strconv.ParseUint(fl[4], 10, 64)
	return m, true
}
