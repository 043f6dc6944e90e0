package record

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/dbiolat/dbiolat/internal/storage"
	"golang.org/x/sys/unix"
)

// Environment gathers the facts a comparison needs about where a trace
// ran: kernel, CPUs, memory, the server ("MariaDB 10.11.19"; "" for a
// PostgreSQL data directory, named by its PG_VERSION), and the data
// directory's file system, device and mount options.
func Environment(server, dataDir string) map[string]string {
	env := map[string]string{"cpus": fmt.Sprint(runtime.NumCPU()), "data_dir": dataDir, "server": server}
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
		if server == "" {
			env["server"] = "PostgreSQL " + env["postgres_version"]
		}
	}
	if s, err := storage.Of(dataDir); err == nil {
		env["mount_point"], env["fs_type"], env["device"], env["mount_options"] = s.Point, s.FSType, s.Source, s.Options
		if s.BackingFile != "" { // the file behind a loop device is the storage
			env["backing_file"] = s.BackingFile
		}
		if len(s.Engines) > 0 { // the process serving a FUSE file system
			env["engine"] = s.Engines[0].String()
		}
	}
	return env
}
