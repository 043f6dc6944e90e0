// Package container tells which container, and which Kubernetes pod, a
// process runs in, from its cgroup (v2, or v1's hierarchies) as the
// container runtimes lay it out, and from the files Kubernetes gives the
// pod, read through /proc/PID/root. No runtime's API is asked: an agent
// on the host sees only what the kernel shows.
package container

import (
	"bufio"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/dbiolat/dbiolat/internal/procfs"
)

// Info is what a process's cgroup and pod files say; the zero value: not
// in a container anyone recognizes.
type Info struct {
	Runtime string `json:"runtime,omitempty"` // "containerd", "cri-o", "docker", "podman"
	ID      string `json:"id,omitempty"`      // the container's id (64 hex digits)
	// Kubernetes: the pod's UID (from the cgroup), its QoS class, and its
	// namespace and name (from the pod's service account and hostname
	// files, when the pod has them).
	PodUID    string `json:"pod_uid,omitempty"`
	QoS       string `json:"qos,omitempty"` // "guaranteed", "burstable", "besteffort"
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
}

// InContainer says the process runs in a container.
func (i Info) InContainer() bool { return i.ID != "" }

var (
	// The last path element of a container's cgroup, by runtime, under
	// the systemd driver (a scope) or cgroupfs (the bare id).
	scopeRe = regexp.MustCompile(`^(cri-containerd|crio|docker|libpod)-([0-9a-f]{64})\.scope$`)
	bareRe  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// A pod's cgroup: kubepods-<qos>-pod<uid>.slice (systemd: the UID's
	// dashes are underscores) or pod<uid> (cgroupfs).
	podRe = regexp.MustCompile(`^(?:kubepods-(?:(burstable|besteffort)-)?)?pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$`)
)

var runtimes = map[string]string{"cri-containerd": "containerd", "crio": "cri-o", "docker": "docker", "libpod": "podman"}

// ParseCgroupPath reads a cgroup path (/proc/PID/cgroup's third field).
func ParseCgroupPath(p string) Info {
	var in Info
	parts := strings.Split(strings.Trim(p, "/"), "/")
	kube := false
	for i, part := range parts {
		switch {
		case part == "kubepods" || part == "kubepods.slice":
			kube = true
		case podRe.MatchString(part):
			// A pod's: "pod" and a UUID say it alone, as they must when
			// we run in a pod ourselves, in a cgroup namespace of our
			// own, where what is above the pod reads "..". The QoS class
			// is in the name (systemd driver) or the directory above it.
			kube = true
			m := podRe.FindStringSubmatch(part)
			switch {
			case m[1] != "":
				in.QoS = m[1]
			case i > 0 && (parts[i-1] == "burstable" || parts[i-1] == "besteffort"):
				in.QoS = parts[i-1]
			}
			in.PodUID = strings.ReplaceAll(m[2], "_", "-")
		case i == len(parts)-1 || i == len(parts)-2: // the container: last, or above a nested cgroup (init.scope)
			if m := scopeRe.FindStringSubmatch(part); m != nil {
				in.Runtime, in.ID = runtimes[m[1]], m[2]
			} else if bareRe.MatchString(part) {
				in.ID = part
				switch {
				case kube: // cgroupfs under kubepods: the CRI runtime does not say which
				case i > 0 && parts[i-1] == "docker":
					in.Runtime = "docker"
				case i > 0 && parts[i-1] == "libpod_parent":
					in.Runtime = "podman"
				}
			}
		}
	}
	if in.PodUID != "" && in.QoS == "" {
		in.QoS = "guaranteed" // its pod cgroup sits right under kubepods
	}
	if in.ID == "" {
		return Info{}
	}
	return in
}

// ParseCgroupFile reads /proc/PID/cgroup: the unified hierarchy's line
// ("0::/path") if it names a container, else the first v1 line that does.
func ParseCgroupFile(text string) Info {
	var found Info
	for _, line := range strings.Split(text, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		in := ParseCgroupPath(f[2])
		if !in.InContainer() {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			return in
		}
		if !found.InContainer() {
			found = in
		}
	}
	return found
}

// Of tells which container process pid runs in, and for a Kubernetes
// pod its namespace and name where the pod's files give them.
func Of(pid int) (Info, error) {
	b, err := os.ReadFile(procfs.Path(pid, "cgroup"))
	if err != nil {
		return Info{}, err
	}
	in := ParseCgroupFile(string(b))
	if in.InContainer() && in.Runtime == "" {
		in.Runtime = runtimeOfShim(pid)
	}
	if in.PodUID != "" && ownMountNamespace(pid) {
		root := procfs.Path(pid, "root")
		in.Namespace = firstLine(inRoot(root, "/var/run/secrets/kubernetes.io/serviceaccount/namespace"))
		in.Pod = firstLine(inRoot(root, "/etc/hostname")) // the pod's name, unless its spec sets a hostname
	}
	return in, nil
}

// inRoot is the path of name as a process whose root is root sees it.
// The kernel follows an absolute symlink met under /proc/PID/root from
// our root, not the process's: Debian's /var/run -> /run would lead to
// the host's /run. So each one met on the way is followed here, in root.
func inRoot(root, name string) string {
	at, rest := "/", strings.Split(strings.Trim(name, "/"), "/")
	for links := 0; len(rest) > 0; {
		next := path.Join(at, rest[0])
		rest = rest[1:]
		target, err := os.Readlink(root + next)
		if err != nil || links == 40 { // not a link (or a loop: the kernel gives up at 40)
			at = next
			continue
		}
		links++
		if path.IsAbs(target) {
			at = "/"
		}
		rest = append(strings.Split(strings.Trim(target, "/"), "/"), rest...)
	}
	return root + at
}

// ownMountNamespace says the process sees files of its own (a container's
// root), not the host's as we do: only then are its pod files the pod's.
func ownMountNamespace(pid int) bool {
	theirs, err1 := os.Readlink(procfs.Path(pid, "ns", "mnt"))
	ours, err2 := os.Readlink(procfs.Path(os.Getpid(), "ns", "mnt"))
	return err1 == nil && err2 == nil && theirs != ours
}

// runtimeOfShim tells the runtime of a container whose cgroup does not
// (Kubernetes with the cgroupfs driver) by the process that started it:
// CRI-O's conmon, or containerd's shim. "" when neither.
func runtimeOfShim(pid int) string {
	for range 8 { // up the tree from the process to its container's shim
		ppid, err := procfs.PPid(pid)
		if err != nil || ppid <= 1 {
			return ""
		}
		comm := procfs.Comm(ppid)
		switch {
		case comm == "conmon":
			return "cri-o"
		case strings.HasPrefix(comm, "containerd-shim"):
			return "containerd"
		}
		pid = ppid
	}
	return ""
}

// firstLine is a file's first line, "" if it cannot be read.
func firstLine(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan()
	return strings.TrimSpace(sc.Text())
}
