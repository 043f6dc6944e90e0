package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/container"
)

// A PostgreSQL whose postmaster runs in a cgroup laid out as the kubelet
// lays a pod's container out: its query records name the container and
// the pod.
func TestContainerNamedInRecords(t *testing.T) {
	c := startPG(t, nil)
	base := "/sys/fs/cgroup/pids" // this kernel's v1 hierarchy that any process can be moved in
	if _, err := os.Stat(base); err != nil {
		base = "/sys/fs/cgroup"
	}
	const uid, id = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d"
	dir := filepath.Join(base, "kubepods", "besteffort", "pod"+uid, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("making a cgroup: %v", err)
	}
	t.Cleanup(func() { // give its processes back to the root, then remove it
		procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, pid := range strings.Fields(string(procs)) {
			os.WriteFile(filepath.Join(base, "cgroup.procs"), []byte(pid), 0)
		}
		for d := dir; d != base; d = filepath.Dir(d) {
			os.Remove(d)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(c.PostmasterPID())), 0); err != nil {
		t.Fatalf("moving the postmaster into the cgroup: %v", err)
	}
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", strconv.Itoa(c.PostmasterPID()))
	psql(t, c, "SELECT 'in a pod'")
	qs, _, _ := tr.stop(t)
	q := only(t, qs, "SELECT $1", 1)[0]
	want := container.Info{ID: id, PodUID: uid, QoS: "besteffort"}
	if q.Container == nil || *q.Container != want {
		t.Errorf("the query's container: %+v, want %+v", q.Container, want)
	}
}
