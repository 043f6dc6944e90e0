package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dbiolat/dbiolat/internal/procfs"
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
// it is not a FUSE file system. Its server holds /dev/fuse open on the
// mount's connection, which the descriptor's fdinfo names (fuse_connection,
// Linux 6.6 on). Where fdinfo does not say, the holders whose arguments
// name the mount point, else every holder: a process serving another mount
// sees no request of the database (the kernel side matches requests by
// connection).
func Under(path string) ([]Engine, error) {
	m, err := MountOf(path)
	if err != nil || !strings.HasPrefix(m.FSType, "fuse") {
		return nil, err
	}
	holders, err := fuseHolders()
	if err != nil {
		return nil, err
	}
	var serving, named, all []Engine
	for _, h := range holders {
		e := Engine{PID: h.pid, Name: procfs.Comm(h.pid), Mount: m.Point, FSType: m.FSType, Source: m.Source, Conn: m.Dev}
		switch {
		case h.conn == int64(m.Dev):
			serving = append(serving, e)
		case h.conn < 0:
			all = append(all, e)
			if namesMount(h.pid, m.Point) {
				named = append(named, e)
			}
		}
	}
	for _, es := range [][]Engine{serving, named} {
		if len(es) > 0 {
			return es, nil
		}
	}
	return all, nil
}

// holder is a process with /dev/fuse open, and the connection it serves
// (-1: fdinfo does not say).
type holder struct {
	pid  int
	conn int64
}

// fuseHolders lists the processes with /dev/fuse open.
func fuseHolders() ([]holder, error) {
	pids, err := procfs.PIDs()
	if err != nil {
		return nil, err
	}
	var out []holder
	for _, pid := range pids {
		fds, _ := procfs.FDs(pid)
		for _, fd := range fds {
			var st unix.Stat_t
			if unix.Stat(procfs.Path(pid, "fd", fd), &st) == nil &&
				st.Mode&unix.S_IFMT == unix.S_IFCHR && unix.Major(st.Rdev) == 10 && unix.Minor(st.Rdev) == 229 {
				out = append(out, holder{pid, fuseConnection(pid, fd)})
			}
		}
	}
	return out, nil
}

// fuseConnection reads the connection a /dev/fuse descriptor serves from
// its fdinfo; -1 when it does not say.
func fuseConnection(pid, fd int) int64 {
	b, _ := os.ReadFile(procfs.Path(pid, "fdinfo", fd))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "fuse_connection:"); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// namesMount says whether a process's arguments name the mount point.
func namesMount(pid int, point string) bool {
	args, _ := procfs.Cmdline(pid)
	for i, arg := range args {
		if i > 0 && filepath.Clean(arg) == point {
			return true
		}
	}
	return false
}
