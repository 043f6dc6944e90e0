// Package mysql knows MySQL and MariaDB: the running servers (instances)
// and the client/server protocol's commands, as far as dbiolat reads them.
// It is the twin of internal/postgres and, like it, knows nothing of BPF.
//
// One server is one process: every connection is served by a thread of
// it (mysqld and mariadbd do not fork), so an instance is a PID, and a
// thread id names the same instance.
package mysql

import (
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dbiolat/dbiolat/internal/procfs"
)

// Instance is one running MySQL-family server.
type Instance struct {
	PID     int
	DataDir string // its working directory: mysqld and mariadbd chdir to their data directory
	// Binary is the running executable as /proc/PID/exe: a path that opens
	// the very file the process runs, from here, across mount namespaces
	// and after a package upgrade replaced the file on disk.
	Binary  string
	Flavor  string // "MariaDB" or "MySQL" (Percona Server and other MySQL builds too)
	Version string // "10.11.19", "8.0.36": the release, without suffixes; "" unknown
	Major   int    // major*100 + minor (1011 for 10.11, 800 for 8.0), comparable; 0 unknown
	Port    int    // the TCP port it serves clients on; 0: none (skip-networking)
	Socket  string // the unix socket it serves clients on, as the server named it; "" none
}

// The two flavors.
const (
	MariaDB = "MariaDB"
	MySQL   = "MySQL"
)

// isServerExe says whether a process runs mysqld or mariadbd. The kernel
// resolves /proc/PID/exe, so Debian's mysqld symlink to mariadbd reads
// as mariadbd, and an older MariaDB's own mysqld as mysqld.
func isServerExe(pid int) bool { return isServer(procfs.ExeName(pid)) }

// isServer says whether an executable's file name is a MySQL or MariaDB server's.
func isServer(name string) bool { return name == "mysqld" || name == "mariadbd" }

// cmdline is a process's arguments; none if they cannot be read.
func cmdline(pid int) []string {
	args, _ := procfs.Cmdline(pid)
	return args
}

// option returns the value of a long option in a server's command line
// (--name=value or --name value), or of its short form (-Xvalue, -X value).
func option(args []string, long string, short byte) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+long+"="); ok {
			return v
		}
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		if a == "--"+long {
			return next
		}
		if short != 0 && len(a) >= 2 && a[0] == '-' && a[1] == short {
			if len(a) > 2 {
				return a[2:]
			}
			return next
		}
	}
	return ""
}

// bootstrapping says a server runs to create a data directory
// (mariadb-install-db's --bootstrap, MySQL's --initialize): it serves no
// client and exits.
func bootstrapping(args []string) bool {
	for _, a := range args {
		if a == "--bootstrap" || a == "--initialize" || a == "--initialize-insecure" {
			return true
		}
	}
	return false
}

func instanceOf(pid int) Instance {
	args := cmdline(pid)
	dir, err := os.Readlink(procfs.Path(pid, "cwd"))
	if err != nil {
		dir = option(args, "datadir", 'h')
	}
	in := Instance{PID: pid, DataDir: dir, Binary: procfs.Path(pid, "exe")}
	in.Flavor, in.Version = versionOf(in.Binary)
	if in.Flavor == "" { // the executable could not be read: its name is the best guess
		in.Flavor = MySQL
		if procfs.ExeName(pid) == "mariadbd" {
			in.Flavor = MariaDB
		}
	}
	in.Major = major(in.Version)
	in.Port, in.Socket = listeners(pid, args)
	return in
}

// ByPID finds the server a process or thread id belongs to.
func ByPID(pid int) (Instance, error) {
	if _, err := os.Stat(procfs.Path(pid)); err != nil {
		return Instance{}, fmt.Errorf("no process has PID %d: check the PID (pgrep -a 'mysqld|mariadbd' lists MySQL and MariaDB servers)", pid)
	}
	// A thread id opens /proc/TID too; its Tgid is the process.
	if tgid, err := procfs.Tgid(pid); err == nil && tgid > 0 {
		pid = tgid
	}
	if err := procfs.ExeReadable(pid); err != nil {
		return Instance{}, err
	}
	if !isServerExe(pid) {
		return Instance{}, fmt.Errorf("process %d (%s) is not a MySQL or MariaDB server: give the PID of mysqld or mariadbd (or of one of its threads), or its data directory", pid, procfs.Comm(pid))
	}
	// A server's child running the server binary (rare: a helper forked
	// without exec) belongs to its parent.
	return instanceOf(procfs.Topmost(pid, isServerExe)), nil
}

// ByDataDir finds the server whose data directory is dir: the one whose
// working directory is the same directory (compared as files, so that
// symlinks do not matter), or else the one that sees dir as its data
// directory in its own mount namespace (a container's).
func ByDataDir(dir string) (Instance, error) {
	want, statErr := os.Stat(dir)
	if statErr != nil && !errors.Is(statErr, os.ErrNotExist) {
		return Instance{}, fmt.Errorf("cannot read the data directory %s: %w", dir, statErr)
	}
	ins, err := Discover()
	if err != nil {
		return Instance{}, err
	}
	var same, seen []Instance
	for _, in := range ins {
		if cwd, err := os.Stat(procfs.Path(in.PID, "cwd")); statErr == nil && err == nil && os.SameFile(want, cwd) {
			same = append(same, in)
		} else if filepath.Clean(in.DataDir) == filepath.Clean(dir) {
			seen = append(seen, in)
		}
	}
	if len(same) == 0 {
		same = seen
	}
	switch len(same) {
	case 0:
		return Instance{}, fmt.Errorf("no MySQL or MariaDB server is running on %s: start the server or check the path", dir)
	case 1:
		return same[0], nil
	}
	pids := make([]string, len(same))
	for i, in := range same {
		pids[i] = strconv.Itoa(in.PID)
	}
	return Instance{}, fmt.Errorf("%d MySQL or MariaDB servers use %s as their data directory (in containers: PIDs %s): choose one with --pid", len(same), dir, strings.Join(pids, ", "))
}

// Discover finds every running MySQL and MariaDB server on the host:
// each mysqld or mariadbd process (threads are not listed in /proc), but
// not one creating a data directory or still starting.
func Discover() ([]Instance, error) {
	programs, err := procfs.Programs()
	if err != nil {
		return nil, err
	}
	var out []Instance
	for _, pid := range slices.Sorted(maps.Keys(programs)) {
		if !isServer(programs[pid]) || bootstrapping(cmdline(pid)) {
			continue
		}
		if p, err := procfs.PPid(pid); err == nil && p > 1 && isServer(programs[p]) {
			continue // found through its parent
		}
		// A server opens its port and socket last, once it has moved to
		// its data directory and recovered: until then it is starting
		// (where it stands is not its data directory yet), as PostgreSQL's
		// postmaster that has not written postmaster.pid.
		if in := instanceOf(pid); in.Port != 0 || in.Socket != "" {
			out = append(out, in)
		}
	}
	return out, nil
}

// version reads a server's flavor and release from its executable,
// without running it where it can: reading the file works whatever mount
// namespace or libraries the server runs with (a container's, a chroot's),
// and runs nothing of a container's on the host.
//
// MariaDB's version string, "10.11.19-MariaDB" (VERSION "-MariaDB", the
// suffix a distribution adds is a string of its own), is a literal in
// .rodata: found there, the file is MariaDB's. Checked on Debian 12's
// /usr/sbin/mariadbd 10.11.19. MySQL's release is a literal "MySQL 9.7.4"
// there (Debian sid's mysqld 9.7.4; the bare "9.7.4" its code uses is that
// literal's tail, merged by the linker).
//
// Without either literal the file is run with --no-defaults --version
// ("mysqld  Ver 8.0.36 for Linux on x86_64 (MySQL Community Server -
// GPL)"); a server in a container whose libraries are not ours may not run
// here: its version stays unknown.
func version(exe string) (flavor, release string) {
	flavor, release, read := rodataVersion(exe)
	if release != "" {
		return flavor, release
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, exe, "--no-defaults", "--version").Output(); err == nil {
		flavor, release = parseVersionLine(string(out))
	}
	if flavor == "" && read {
		flavor = MySQL // not MariaDB's: its .rodata would have said so
	}
	return flavor, release
}

// rodataVersion finds the version literal in an executable's read-only
// data; read says the data could be read at all.
func rodataVersion(exe string) (flavor, release string, read bool) {
	f, err := elf.Open(exe)
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	sec := f.Section(".rodata")
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return "", "", false
	}
	data, err := sec.Data()
	if err != nil {
		return "", "", false
	}
	flavor, release = versionLiteral(data)
	return flavor, release, true
}

// versionLiteral returns the flavor and release of the first
// NUL-delimited string in b that reads "N.N.N-MariaDB", else of the first
// that reads "MySQL N.N.N".
func versionLiteral(b []byte) (flavor, release string) {
	release = literal(b, "", "-MariaDB")
	if release != "" {
		return MariaDB, release
	}
	if release = literal(b, "MySQL ", ""); release != "" {
		return MySQL, release
	}
	return "", ""
}

// literal returns N.N.N of the first NUL-delimited string in b that reads
// prefix "N.N.N" suffix (one of them not empty: it is what is looked for).
func literal(b []byte, prefix, suffix string) string {
	needle := []byte(cmp.Or(prefix, suffix))
	for off := 0; ; {
		i := bytes.Index(b[off:], needle)
		if i < 0 {
			return ""
		}
		i += off
		off = i + len(needle)
		start, end := bytes.LastIndexByte(b[:i], 0)+1, bytes.IndexByte(b[i:], 0)
		if end < 0 {
			return ""
		}
		v, ok := strings.CutPrefix(string(b[start:i+end]), prefix)
		if v, ok2 := strings.CutSuffix(v, suffix); ok && ok2 && major(v) > 0 && strings.Count(v, ".") == 2 &&
			strings.Trim(v, "0123456789.") == "" {
			return v
		}
	}
}

// parseVersionLine reads the output of mysqld --version or mariadbd
// --version: "mysqld  Ver 8.0.36-0ubuntu0.22.04.1 for Linux on x86_64 (…)",
// "mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)".
func parseVersionLine(out string) (flavor, release string) {
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] != "Ver" {
			continue
		}
		v := f[i+1]
		flavor = MySQL
		if strings.Contains(v, "MariaDB") || strings.Contains(out, "MariaDB") {
			flavor = MariaDB
		}
		end := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if end >= 0 {
			v = v[:end]
		}
		return flavor, v
	}
	return "", ""
}

// major turns "10.11.19" into 1011 and "8.0.36" into 800; 0 if it cannot.
func major(v string) int {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || maj <= 0 || min < 0 || min > 99 {
		return 0
	}
	return maj*100 + min
}

// listeners finds the TCP port and unix socket a server serves clients on:
// the listening sockets of its network namespace (/proc/PID/net) that are
// its own open files. A server may listen on more than one (MySQL's X
// plugin on 33060 and mysqlx.sock, an admin port, MariaDB's extra_port):
// the one its command line names wins, then the default, then the lowest.
func listeners(pid int, args []string) (port int, socket string) {
	inodes := socketInodes(pid)
	var ports []int
	for _, name := range []string{"tcp", "tcp6"} {
		b, _ := os.ReadFile(procfs.Path(pid, "net", name))
		for _, l := range parseTCPListeners(b) {
			if inodes[l.inode] {
				ports = append(ports, l.port)
			}
		}
	}
	var sockets []string
	b, _ := os.ReadFile(procfs.Path(pid, "net", "unix"))
	for _, l := range parseUnixListeners(b) {
		if inodes[l.inode] && l.path != "" {
			sockets = append(sockets, l.path)
		}
	}
	return choosePort(ports, option(args, "port", 'P')), chooseSocket(sockets, option(args, "socket", 'S'))
}

func choosePort(ports []int, named string) int {
	if len(ports) == 0 {
		return 0
	}
	sort.Ints(ports)
	want, _ := strconv.Atoi(named)
	for _, w := range []int{want, 3306} {
		for _, p := range ports {
			if p == w {
				return p
			}
		}
	}
	for _, p := range ports {
		if p != 33060 && p != 33062 { // MySQL's X protocol and admin defaults
			return p
		}
	}
	return ports[0]
}

func chooseSocket(sockets []string, named string) string {
	if len(sockets) == 0 {
		return ""
	}
	sort.Strings(sockets)
	for _, s := range sockets {
		if named != "" && (s == named || filepath.Base(s) == filepath.Base(named)) {
			return s
		}
	}
	for _, s := range sockets {
		if !strings.HasSuffix(s, "mysqlx.sock") {
			return s
		}
	}
	return sockets[0]
}

// socketInodes lists the inodes of a process's sockets: its descriptors'
// links read "socket:[inode]" (threads share the table).
func socketInodes(pid int) map[uint64]bool {
	fds, _ := procfs.FDs(pid)
	out := map[uint64]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(procfs.Path(pid, "fd", fd))
		if err != nil {
			continue
		}
		if ino, ok := socketInode(link); ok {
			out[ino] = true
		}
	}
	return out
}

func socketInode(link string) (uint64, bool) {
	s, ok := strings.CutPrefix(link, "socket:[")
	if !ok || !strings.HasSuffix(s, "]") {
		return 0, false
	}
	ino, err := strconv.ParseUint(s[:len(s)-1], 10, 64)
	return ino, err == nil
}

type listener struct {
	port  int
	path  string
	inode uint64
}

// parseTCPListeners reads /proc/net/tcp or tcp6: the sockets in state
// LISTEN (0A), their local port (hex, after the colon) and inode.
func parseTCPListeners(b []byte) []listener {
	var out []listener
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		i := strings.LastIndexByte(f[1], ':')
		if i < 0 {
			continue
		}
		port, err1 := strconv.ParseUint(f[1][i+1:], 16, 16)
		inode, err2 := strconv.ParseUint(f[9], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, listener{port: int(port), inode: inode})
	}
	return out
}

// parseUnixListeners reads /proc/net/unix ("Num RefCount Protocol Flags
// Type St Inode Path"): the sockets that accept connections (flag
// __SO_ACCEPTCON, 0x10000), with the path they were bound to.
func parseUnixListeners(b []byte) []listener {
	const acceptCon = 0x10000
	var out []listener
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 {
			continue
		}
		flags, err1 := strconv.ParseUint(f[3], 16, 32)
		inode, err2 := strconv.ParseUint(f[6], 10, 64)
		if err1 != nil || err2 != nil || flags&acceptCon == 0 {
			continue
		}
		l := listener{inode: inode}
		if len(f) > 7 {
			l.path = f[7]
		}
		out = append(out, l)
	}
	return out
}

// String names an instance in one line: "MariaDB 10.11.19 (PID 386, /var/lib/mysql)".
func (in Instance) String() string {
	return fmt.Sprintf("%s %s (PID %d, %s)", in.Flavor, cmp.Or(in.Version, "of unknown version"), in.PID, in.DataDir)
}
