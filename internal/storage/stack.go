package storage

import (
	"fmt"
	"strings"
)

// Stack is what a path's reads go through on their way to a disk: the
// mount and its device, the file behind that device when it is a loop
// device, the processes serving it when it is a FUSE file system.
type Stack struct {
	Mount
	BackingFile string   // the file behind a loop device
	Engines     []Engine // the daemons serving a FUSE file system
}

// Of finds the stack under path.
func Of(path string) (Stack, error) {
	m, err := MountOf(path)
	if err != nil {
		return Stack{}, err
	}
	if m.Point == "" {
		return Stack{}, fmt.Errorf("%s is on no mount in /proc/self/mountinfo", path)
	}
	s := Stack{Mount: m, BackingFile: LoopFile(m.Source)}
	s.Engines, err = Under(path)
	return s, err
}

// String says it in one line: "/dev/loop3 (ext4, mounted at /mnt), a
// loop device over /var/disk.img", "bindfs[812] serving /mnt (fuse.bindfs)
// from /src".
func (s Stack) String() string {
	if len(s.Engines) > 0 {
		names := make([]string, len(s.Engines))
		for i, e := range s.Engines {
			names[i] = e.String()
		}
		return strings.Join(names, ", ") + " from " + s.Source
	}
	out := fmt.Sprintf("%s (%s, mounted at %s)", s.Source, s.FSType, s.Point)
	if s.BackingFile != "" {
		out += ", a loop device over " + s.BackingFile + " (served by the kernel's loop workers)"
	}
	return out
}
