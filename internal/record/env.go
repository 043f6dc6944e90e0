package record

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Environment gathers the facts a comparison needs about where a trace
// ran: kernel, CPUs, memory, and the PostgreSQL data directory's version,
// file system, device and mount options.
func Environment(dataDir string) map[string]string {
	env := map[string]string{"cpus": fmt.Sprint(runtime.NumCPU()), "data_dir": dataDir}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		env["kernel"] = unix.ByteSliceToString(u.Release[:])
		env["hostname"] = unix.ByteSliceToString(u.Nodename[:])
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		env["memory_bytes"] = fmt.Sprint(uint64(si.Totalram) * uint64(si.Unit))
	}
	if b, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION")); err == nil {
		env["postgres_version"] = strings.TrimSpace(string(b))
	}
	if m, ok := mountOf(dataDir); ok {
		env["mount_point"], env["fs_type"], env["device"], env["mount_options"] = m[0], m[1], m[2], m[3]
		// A loop device: the file behind it is the storage.
		if b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(m[2]), "loop/backing_file")); err == nil {
			env["backing_file"] = strings.TrimSpace(string(b))
		}
	}
	return env
}

// mountOf finds the mount holding path in /proc/self/mountinfo: the
// longest mount point that prefixes it. It returns point, type, source and
// options.
func mountOf(path string) ([4]string, bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return [4]string{}, false
	}
	defer f.Close()
	var best [4]string
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root point options [optional...] - type source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 6 || len(b) < 2 {
			continue
		}
		point := a[4]
		if (path == point || strings.HasPrefix(path, strings.TrimSuffix(point, "/")+"/")) && len(point) >= len(best[0]) {
			best, found = [4]string{point, b[0], b[1], a[5]}, true
		}
	}
	return best, found
}
