package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Engine is a process serving the file system a path lies on.
type Engine struct {
	PID    int
	Name   string // its command name ("bindfs")
	Mount  string // the mount point it serves
	FSType string // "fuse.bindfs"
	Source string // what the mount says it serves from
	Conn   uint32 // the FUSE connection: the mount's device number, as the kernel numbers it
}

// String names the engine for people: "bindfs[1234] serving /mnt (fuse.bindfs)".
func (e Engine) String() string {
	return fmt.Sprintf("%s[%d] serving %s (%s)", e.Name, e.PID, e.Mount, e.FSType)
}

// Under finds the engines serving the file system path lies on: none when
// it is not a FUSE file system. The mount does not say which process
// serves it; its server is among the processes that hold /dev/fuse open,
// and when several do, those whose arguments name the mount point (as
// bindfs's and most daemons' do). If none names it, all are returned: a
// process serving another mount sees no request of the database.
func Under(path string) ([]Engine, error) {
	m, err := MountOf(path)
	if err != nil || !strings.HasPrefix(m.FSType, "fuse") {
		return nil, err
	}
	holders, err := fuseHolders()
	if err != nil {
		return nil, err
	}
	var named, all []Engine
	for _, pid := range holders {
		e := Engine{PID: pid, Name: comm(pid), Mount: m.Point, FSType: m.FSType, Source: m.Source, Conn: m.Dev}
		all = append(all, e)
		if namesMount(pid, m.Point) {
			named = append(named, e)
		}
	}
	if len(named) > 0 {
		return named, nil
	}
	return all, nil
}

// fuseHolders lists the processes with /dev/fuse open.
func fuseHolders() ([]int, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			var st unix.Stat_t
			if unix.Stat(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()), &st) == nil &&
				st.Mode&unix.S_IFMT == unix.S_IFCHR && unix.Major(st.Rdev) == 10 && unix.Minor(st.Rdev) == 229 {
				out = append(out, pid)
				break
			}
		}
	}
	return out, nil
}

// namesMount says whether a process's arguments name the mount point: in
// full, or as a relative path that ends it (a daemon started as
// `bindfs src mnt` from the directory above).
func namesMount(pid int, point string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	for _, arg := range strings.Split(string(b), "\x00")[1:] {
		arg = filepath.Clean(arg)
		if arg == point || !filepath.IsAbs(arg) && arg != "." && strings.HasSuffix(point, "/"+arg) {
			return true
		}
	}
	return false
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}
