package procfs

import (
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// MappedFile returns a path that opens, from here, the file process pid
// maps at m (a library, or its executable): the one place a path read
// from /proc/PID/maps is turned into one we can open, or attach a uprobe
// to.
//
// The kernel names a mapped file as seen from the root of whoever reads
// maps (us), and, for a file we cannot reach from our root (another mount
// namespace: a container), from the root of that file's mount namespace.
// So a container's process has its files named as it sees them
// (/usr/lib/…), to be opened under /proc/PID/root; a process in a plain
// chroot on our namespace has them named with the chroot's directory in
// front (/srv/root/usr/lib/…), which /proc/PID/root already is; and one
// chrooted inside a container has them named with the chroot's directory
// as the container sees it. /proc/PID/root's own link is named by the same
// rule, so the file's path below the process's root is what follows that
// name: that, under /proc/PID/root, opens it in every case. A file mapped
// from outside the process's root (mapped before it chrooted) is tried as
// named, then through /proc/PID/map_files (which needs CAP_SYS_ADMIN).
//
// The path chosen is the first of these whose device and inode are the
// mapping's; if none's are (a file replaced since, or an overlay file
// system naming its inodes differently from maps), the first that exists.
func MappedFile(pid int, m Mapping) (string, error) {
	file := strings.TrimSuffix(m.Path, " (deleted)")
	if !strings.HasPrefix(file, "/") {
		return "", fmt.Errorf("mapping %x-%x of process %d is not a file (%q)", m.Lo, m.Hi, pid, m.Path)
	}
	root := Path(pid, "root")
	seen, _ := os.Readlink(root) // "" if unreadable: then the path is taken as the process sees it
	candidates := mappedCandidates(root, seen, file, Path(pid, "map_files", fmt.Sprintf("%x-%x", m.Lo, m.Hi)))
	existing := ""
	for _, c := range candidates {
		var st unix.Stat_t
		if unix.Stat(c, &st) != nil {
			continue
		}
		if st.Dev == m.Dev && st.Ino == m.Inode {
			return c, nil
		}
		if existing == "" {
			existing = c
		}
	}
	if existing != "" {
		return existing, nil
	}
	return "", fmt.Errorf("process %d maps %s, which cannot be opened from here (tried %s)", pid, m.Path, strings.Join(candidates, ", "))
}

// mappedCandidates are the paths that may open a mapped file named file in
// maps, in the order to try them: procRoot is /proc/PID/root, rootSeen what
// its link says ("" if unread), mapFile the mapping's /proc/PID/map_files
// entry. Pure path logic, MappedFile's reasoning.
func mappedCandidates(procRoot, rootSeen, file, mapFile string) []string {
	var out []string
	add := func(p string) {
		for _, o := range out {
			if o == p {
				return
			}
		}
		out = append(out, p)
	}
	if rel, ok := below(rootSeen, file); ok {
		add(procRoot + rel) // the file as the process sees it, through its root
	}
	add(procRoot + file) // its root's link unread, or a container's file outside it
	add(file)            // mapped from outside its chroot, in our mount namespace
	add(mapFile)
	return out
}

// below says where file is under root, both absolute paths as the kernel
// names them ("/" for root itself); false if it is not under root.
func below(root, file string) (string, bool) {
	if !strings.HasPrefix(root, "/") {
		return "", false
	}
	root = path.Clean(root)
	switch {
	case root == "/":
		return file, true
	case file == root:
		return "/", true
	case strings.HasPrefix(file, root+"/"):
		return file[len(root):], true
	}
	return "", false
}
