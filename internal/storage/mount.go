// Package storage says what storage a path lies on: its mount and device,
// the file behind a loop device, and the userspace engine serving a FUSE
// file system (engine.go). A database there reads through these layers;
// compare and doctor name them. No BPF, no database.
package storage

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Mount is the mount a path lies on: one line of /proc/self/mountinfo.
type Mount struct {
	Point, FSType, Source, Options string
	Dev                            uint32 // its device number as the kernel numbers it: major << 20 | minor
}

// MountOf finds the mount holding path: the longest mount point that
// prefixes it (the last such mount, if mounted over).
func MountOf(path string) (Mount, error) {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Mount{}, err
	}
	defer f.Close()
	var best Mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root point options [optional...] - type source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 6 || len(b) < 2 {
			continue
		}
		point := a[4]
		if path != point && !strings.HasPrefix(path, strings.TrimSuffix(point, "/")+"/") || len(point) < len(best.Point) {
			continue
		}
		best = Mount{Point: point, FSType: b[0], Source: b[1], Options: a[5]}
		if maj, min, ok := strings.Cut(a[2], ":"); ok {
			x, _ := strconv.ParseUint(maj, 10, 32)
			y, _ := strconv.ParseUint(min, 10, 32)
			best.Dev = uint32(x<<20 | y)
		}
	}
	return best, sc.Err()
}

// LoopFile is the file behind a loop device ("/dev/loop3"), "" when the
// device is not a loop device.
func LoopFile(device string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(device), "loop/backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
