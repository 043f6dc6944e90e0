package postgres

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dbiolat/dbiolat/internal/procfs"
)

// Instance is one running PostgreSQL server: a postmaster and its children.
type Instance struct {
	PID     int    // the postmaster
	DataDir string // its working directory is the data directory
	Binary  string // path to the running executable, valid across mount namespaces
	Version int    // the major version (PG_VERSION); 0: unknown
	Port    int    // the port it listens on (or names its unix socket by)
}

// The functions of PostgreSQL 18's asynchronous I/O handoff: a backend
// stages a read, an I/O worker performs and completes it.
const (
	AIOStage    = "pgaio_io_stage"
	AIOPerform  = "pgaio_io_perform_synchronously"
	AIOComplete = "pgaio_io_process_completion"
)

// WaitEventVariable is the exported variable that points at a backend's
// current wait event (where pg_stat_activity reads it from).
const WaitEventVariable = "my_wait_event_info"

// ApplicationVariable is the exported variable that points at a backend's
// application_name (the GUC: set from the startup packet, by SET, by
// set_config; exported by 15 to 18 alike).
const ApplicationVariable = "application_name"

// USDT names of the probes that mark a query and its lock waits in
// PostgreSQL builds with --enable-dtrace.
const (
	Provider        = "postgresql"
	QueryStart      = "query__start"
	QueryDone       = "query__done"
	LockWaitStart   = "lock__wait__start"
	LockWaitDone    = "lock__wait__done"
	LWLockWaitStart = "lwlock__wait__start"
	LWLockWaitDone  = "lwlock__wait__done"
	BufferReadDone  = "buffer__read__done"
)

// Title reads a process title (its cmdline as PostgreSQL rewrote it).
func Title(pid int) (string, error) {
	args, err := procfs.Cmdline(pid)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(strings.Join(args, " "), " "), nil
}

// Describe says what a PostgreSQL process does.
func Describe(pid int) (Process, error) {
	t, err := Title(pid)
	if err != nil {
		return Process{}, err
	}
	return ParseTitle(t), nil
}

func isPostgresExe(pid int) bool { return isPostgres(procfs.ExeName(pid)) }

// isPostgres says whether an executable's file name is PostgreSQL's server.
func isPostgres(name string) bool { return name == "postgres" || name == "postmaster" }

func instanceOf(postmaster int) Instance {
	dir, _ := os.Readlink(procfs.Path(postmaster, "cwd"))
	// Read through the postmaster's cwd: valid in its mount namespace too.
	v, _ := os.ReadFile(procfs.Path(postmaster, "cwd", "PG_VERSION"))
	major, _ := strconv.Atoi(strings.TrimSpace(string(v)))
	if major == 0 { // the data directory is the server's alone: its executable says it too
		major = MajorOfBinary(procfs.Path(postmaster, "exe"))
	}
	// postmaster.pid: pid, data directory, start time, port, ...
	pidFile, _ := os.ReadFile(procfs.Path(postmaster, "cwd", "postmaster.pid"))
	var port int
	if lines := strings.Split(string(pidFile), "\n"); len(lines) > 3 {
		port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
	}
	return Instance{
		PID:     postmaster,
		DataDir: dir,
		Binary:  procfs.Path(postmaster, "exe"),
		Version: major,
		Port:    port,
	}
}

// ByPID finds the instance a process belongs to: the postmaster itself or
// any of its children.
func ByPID(pid int) (Instance, error) {
	if _, err := os.Stat(procfs.Path(pid)); err != nil {
		return Instance{}, fmt.Errorf("no process has PID %d: check the PID (pgrep -a postgres lists PostgreSQL processes)", pid)
	}
	if err := procfs.ExeReadable(pid); err != nil {
		return Instance{}, err
	}
	if !isPostgresExe(pid) {
		return Instance{}, fmt.Errorf("process %d (%s) is not PostgreSQL: give the PID of a postgres process, or use --pgdata", pid, procfs.Comm(pid))
	}
	// Walk up while the parent is a postgres process too: the top one is
	// the postmaster.
	return instanceOf(procfs.Topmost(pid, isPostgresExe)), nil
}

// ByDataDir finds the instance serving a data directory, from the first
// line of its postmaster.pid.
func ByDataDir(dir string) (Instance, error) {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if errors.Is(err, os.ErrNotExist) {
		// Not on this host's file system: a path in a container, as its server sees it?
		if in, found, err := servingDir(dir); found || err != nil {
			return in, err
		}
		return Instance{}, fmt.Errorf("no PostgreSQL is running on %s (it has no postmaster.pid, and no server sees a data directory there): start the server or check the path", dir)
	}
	if err != nil {
		return Instance{}, fmt.Errorf("reading %s: %w", filepath.Join(dir, "postmaster.pid"), err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return Instance{}, fmt.Errorf("%s/postmaster.pid does not start with a PID: is this a PostgreSQL data directory?", dir)
	}
	if inst, err := ByPID(pid); err == nil && !elsewhere(dir, inst.PID) {
		return inst, nil
	}
	// The PID of another pid namespace (a container's): the server whose
	// working directory this is.
	if in, found, err := servingDir(dir); found || err != nil {
		return in, err
	}
	return Instance{}, fmt.Errorf("%s/postmaster.pid names PID %d, which is not running PostgreSQL (a stale file?)", dir, pid)
}

// sameFile says whether dir is the working directory of process pid:
// a postmaster's is its data directory.
func sameFile(dir string, pid int) bool {
	a, err1 := os.Stat(dir)
	b, err2 := os.Stat(procfs.Path(pid, "cwd"))
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// elsewhere says whether process pid's working directory is known not
// to be dir (a postmaster.pid's PID in another pid namespace may name an
// unrelated server on the host).
func elsewhere(dir string, pid int) bool {
	_, err := os.Stat(procfs.Path(pid, "cwd"))
	return err == nil && !sameFile(dir, pid)
}

// servingDir finds the running server whose data directory is dir: the
// same directory on this host, or else the one that sees dir as its data
// directory in its own mount namespace (a container's). found: one, or
// several, which is an error.
func servingDir(dir string) (in Instance, found bool, err error) {
	all, err := Discover()
	if err != nil {
		return Instance{}, false, err
	}
	var same, seen []Instance
	for _, i := range all {
		if sameFile(dir, i.PID) {
			same = append(same, i)
		} else if i.DataDir == filepath.Clean(dir) {
			seen = append(seen, i)
		}
	}
	if len(same) == 0 {
		same = seen
	}
	switch len(same) {
	case 0:
		return Instance{}, false, nil
	case 1:
		return same[0], true, nil
	}
	pids := make([]string, len(same))
	for i, in := range same {
		pids[i] = strconv.Itoa(in.PID)
	}
	return Instance{}, true, fmt.Errorf("%d PostgreSQL servers use %s as their data directory (in containers: PIDs %s): choose one with --pid", len(same), dir, strings.Join(pids, ", "))
}

// Discover finds every PostgreSQL instance on the host.
func Discover() ([]Instance, error) {
	programs, err := procfs.Programs()
	if err != nil {
		return nil, err
	}
	var out []Instance
	for _, pid := range slices.Sorted(maps.Keys(programs)) {
		if !isPostgres(programs[pid]) {
			continue
		}
		if p, err := procfs.PPid(pid); err == nil && p > 1 && isPostgres(programs[p]) {
			continue // a child: found through its postmaster
		}
		if !servesItsDataDir(pid) {
			continue // initdb's bootstrap, a single-user backend, a server still starting
		}
		out = append(out, instanceOf(pid))
	}
	return out, nil
}

// servesItsDataDir says whether a postgres process is the postmaster of
// the data directory it runs in: the first line of postmaster.pid names it
// (a single-user backend writes its PID negated, initdb's bootstrap none),
// by its PID in its own PID namespace (a container's: 1, often).
func servesItsDataDir(pid int) bool {
	b, err := os.ReadFile(procfs.Path(pid, "cwd", "postmaster.pid"))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(first) == strconv.Itoa(ownPID(pid))
}

// ownPID is a process's PID as it knows itself, in the innermost PID
// namespace it is in: the last of /proc/PID/status's NSpid.
func ownPID(pid int) int {
	v, _ := procfs.Status(pid, "NSpid")
	if f := strings.Fields(v); len(f) > 0 {
		if own, err := strconv.Atoi(f[len(f)-1]); err == nil {
			return own
		}
	}
	return pid
}

// Processes lists the postmaster and all its live children.
func (in Instance) Processes() ([]int, error) {
	pids, err := procfs.PIDs()
	if err != nil {
		return nil, err
	}
	out := []int{in.PID}
	for _, pid := range pids {
		if p, err := procfs.PPid(pid); err == nil && p == in.PID {
			out = append(out, pid)
		}
	}
	return out, nil
}
