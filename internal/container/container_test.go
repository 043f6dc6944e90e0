package container

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

const id = "3f6b1c2d9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c"

// Real cgroup paths, as each runtime and cgroup driver lays them out
// (read off running hosts; the ids replaced by one).
func TestParseCgroupPath(t *testing.T) {
	for _, c := range []struct {
		name, path string
		want       Info
	}{
		{"containerd, systemd driver, burstable",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1e2d3c_4b5a_4c6d_9e8f_0a1b2c3d4e5f.slice/cri-containerd-" + id + ".scope",
			Info{Runtime: "containerd", ID: id, PodUID: "6f1e2d3c-4b5a-4c6d-9e8f-0a1b2c3d4e5f", QoS: "burstable"}},
		{"containerd, systemd driver, guaranteed",
			"/kubepods.slice/kubepods-pod6f1e2d3c_4b5a_4c6d_9e8f_0a1b2c3d4e5f.slice/cri-containerd-" + id + ".scope",
			Info{Runtime: "containerd", ID: id, PodUID: "6f1e2d3c-4b5a-4c6d-9e8f-0a1b2c3d4e5f", QoS: "guaranteed"}},
		{"cri-o, systemd driver, besteffort",
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod6f1e2d3c_4b5a_4c6d_9e8f_0a1b2c3d4e5f.slice/crio-" + id + ".scope",
			Info{Runtime: "cri-o", ID: id, PodUID: "6f1e2d3c-4b5a-4c6d-9e8f-0a1b2c3d4e5f", QoS: "besteffort"}},
		{"cgroupfs driver (kubelet), runtime not in the path",
			"/kubepods/burstable/pod6f1e2d3c-4b5a-4c6d-9e8f-0a1b2c3d4e5f/" + id,
			Info{ID: id, PodUID: "6f1e2d3c-4b5a-4c6d-9e8f-0a1b2c3d4e5f", QoS: "burstable"}},
		{"containerd, systemd driver, seen from another pod (its cgroup namespace)",
			"/../../kubepods-besteffort-pod6f1e2d3c_4b5a_4c6d_9e8f_0a1b2c3d4e5f.slice/cri-containerd-" + id + ".scope",
			Info{Runtime: "containerd", ID: id, PodUID: "6f1e2d3c-4b5a-4c6d-9e8f-0a1b2c3d4e5f", QoS: "besteffort"}},
		{"cgroupfs driver, seen from another pod",
			"/../../../besteffort/pod6f1e2d3c-4b5a-4c6d-9e8f-0a1b2c3d4e5f/" + id,
			Info{ID: id, PodUID: "6f1e2d3c-4b5a-4c6d-9e8f-0a1b2c3d4e5f", QoS: "besteffort"}},
		{"cgroupfs driver, guaranteed, seen from another pod",
			"/../../../pod6f1e2d3c-4b5a-4c6d-9e8f-0a1b2c3d4e5f/" + id,
			Info{ID: id, PodUID: "6f1e2d3c-4b5a-4c6d-9e8f-0a1b2c3d4e5f", QoS: "guaranteed"}},
		{"docker, systemd driver", "/system.slice/docker-" + id + ".scope", Info{Runtime: "docker", ID: id}},
		{"docker, cgroupfs driver", "/docker/" + id, Info{Runtime: "docker", ID: id}},
		{"podman, rootful", "/machine.slice/libpod-" + id + ".scope", Info{Runtime: "podman", ID: id}},
		{"podman, with a nested cgroup", "/machine.slice/libpod-" + id + ".scope/container", Info{Runtime: "podman", ID: id}},
		{"podman, rootless", "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + id + ".scope", Info{Runtime: "podman", ID: id}},
		{"podman, cgroupfs", "/libpod_parent/" + id, Info{Runtime: "podman", ID: id}},
		{"a systemd service", "/system.slice/postgresql@15-main.service", Info{}},
		{"a user session", "/user.slice/user-0.slice/session-3.scope", Info{}},
		{"the root", "/", Info{}},
	} {
		if got := ParseCgroupPath(c.path); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// /proc/PID/cgroup: v2's line wins; under v1, the first hierarchy that
// names a container.
func TestParseCgroupFile(t *testing.T) {
	v1 := "12:pids:/docker/" + id + "\n11:memory:/docker/" + id + "\n1:name=systemd:/docker/" + id + "\n0::/\n"
	if got := ParseCgroupFile(v1); got.ID != id || got.Runtime != "docker" {
		t.Errorf("v1: %+v", got)
	}
	v2 := "0::/system.slice/docker-" + id + ".scope\n"
	if got := ParseCgroupFile(v2); got.ID != id || got.Runtime != "docker" {
		t.Errorf("v2: %+v", got)
	}
	if got := ParseCgroupFile("0::/user.slice/user-0.slice/session-1.scope\n"); got.InContainer() {
		t.Errorf("a host process is in %+v", got)
	}
}

// A real process moved into a cgroup laid out as the kubelet lays a pod's
// container out (cgroupfs driver) is found in it: Of reads /proc.
func TestOfRealCgroup(t *testing.T) {
	testenv.NeedRoot(t)
	base := "/sys/fs/cgroup/pids" // this kernel's v1 hierarchy that any process can be moved in
	if _, err := os.Stat(base); err != nil {
		base = "/sys/fs/cgroup" // v2 only
	}
	const uid = "6f1e2d3c-4b5a-4c6d-9e8f-0a1b2c3d4e5f"
	dir := filepath.Join(base, "kubepods", "burstable", "pod"+uid, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("making a cgroup: %v", err)
	}
	defer func() { // innermost first; each must be empty of processes
		for d := dir; d != base; d = filepath.Dir(d) {
			os.Remove(d)
		}
	}()
	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
		t.Fatalf("moving a process into the cgroup: %v", err)
	}
	got, err := Of(sleep.Process.Pid)
	if err != nil || got.ID != id || got.PodUID != uid || got.QoS != "burstable" || got.Runtime != "" {
		t.Errorf("Of: %+v, %v", got, err)
	}
	host, err := Of(os.Getpid())
	if err != nil || host.InContainer() {
		t.Errorf("the test itself is in %+v (%v)", host, err)
	}
}

// Symlinks under a process's root lead where they lead in that root:
// Debian's /var/run -> /run (absolute), and a relative one.
func TestInRoot(t *testing.T) {
	root := t.TempDir()
	sa := filepath.Join(root, "run/secrets/kubernetes.io/serviceaccount")
	if err := os.MkdirAll(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(sa, "namespace"), []byte("prod"), 0o644)
	os.MkdirAll(filepath.Join(root, "var"), 0o755)
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.Symlink("/run", filepath.Join(root, "var/run"))
	os.WriteFile(filepath.Join(root, "etc/hostname.real"), []byte("pg-0\n"), 0o644)
	os.Symlink("../etc/./hostname.real", filepath.Join(root, "etc/hostname"))
	for name, want := range map[string]string{
		"/var/run/secrets/kubernetes.io/serviceaccount/namespace": "prod",
		"/etc/hostname": "pg-0",
	} {
		if got := firstLine(inRoot(root, name)); got != want {
			t.Errorf("%s in the root reads %q (%s), want %q", name, got, inRoot(root, name), want)
		}
	}
	if got, want := inRoot(root, "/etc/none"), root+"/etc/none"; got != want {
		t.Errorf("a missing file: %s, want %s", got, want)
	}
}
