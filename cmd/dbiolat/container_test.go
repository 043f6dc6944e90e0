package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/dbiolat/dbiolat/internal/container"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// A PostgreSQL whose postmaster runs in a cgroup laid out as the kubelet
// lays a pod's container out: its query records name the container and
// the pod (its UID: no pod files on the host to name it).
func TestContainerNamedInRecords(t *testing.T) {
	c := startPG(t, nil)
	const uid, id = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d"
	dir := podCgroup(t, filepath.Join("kubepods", "besteffort", "pod"+uid, id)) // the cgroupfs driver's layout
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

// podCgroup makes a cgroup at rel (a path as the kubelet and a container
// runtime lay one out) in a hierarchy any process can be moved in: this
// kernel's v1 pids one, else v2's. At the end its processes go back to
// the root and it is removed.
func podCgroup(t *testing.T, rel string) string {
	t.Helper()
	base := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(base); err != nil {
		base = "/sys/fs/cgroup"
	}
	dir := filepath.Join(base, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("making a cgroup: %v", err)
	}
	t.Cleanup(func() {
		procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, pid := range strings.Fields(string(procs)) {
			os.WriteFile(filepath.Join(base, "cgroup.procs"), []byte(pid), 0)
		}
		for d := dir; d != base; d = filepath.Dir(d) {
			os.Remove(d)
		}
	})
	return dir
}

// A pod running PostgreSQL as containerd and the kubelet (systemd
// driver) make one: its own pid, mount and cgroup namespaces, a server
// binary and a data directory of its own that only it sees (the host's
// path of the binary holds another file), and the pod's files in it.
type pod struct {
	name, uid, id string
	postmaster    int    // its pid, as the host sees it
	sock          string // where its socket is, seen from the host too
	bin           string // the client's
	stop          func() // stops the server, and so the pod's namespaces
}

// podDataDir is the pods' data directory, as the official image has it.
const podDataDir = "/var/lib/postgresql/data"

// startPod starts PostgreSQL in a pod of namespace "prod"; the server
// runs as the pod's pid 1 until the test ends.
func startPod(t *testing.T, name, uid, id string) *pod {
	t.Helper()
	bin, err := pgsandbox.InstalledBinDir()
	if err != nil {
		t.Fatal(err)
	}
	host := reachableTempDir(t, "pod-") // the postgres user reaches its socket here
	// The image: a data directory, and the server binary, a copy (another file).
	image := exec.Command("sh", "-ec", fmt.Sprintf(`cd %s; mkdir image sock; chown postgres: image sock; cp %s/postgres image/postgres
		setpriv --reuid=postgres --regid=postgres --init-groups %s/initdb -D image/data -U postgres --auth=trust --no-sync -E UTF8 --locale=C >/dev/null`,
		host, bin, bin))
	if out, err := image.CombinedOutput(); err != nil {
		t.Fatalf("making the pod's image: %v\n%s", err, out)
	}
	cg := podCgroup(t, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+strings.ReplaceAll(uid, "-", "_")+
		".slice/cri-containerd-"+id+".scope")
	// The shell joins the container's cgroup, then the namespaces are made
	// (the cgroup namespace rooted there), then the container's mounts, and
	// the server runs as its pid 1.
	cmd := exec.Command("sh", "-ec", fmt.Sprintf(`echo $$ > %[1]s/cgroup.procs
		exec unshare --pid --fork --mount --cgroup --propagation private sh -ec '
			mount -t tmpfs -o mode=755 image /var/lib/postgresql
			cp -a %[2]s/image/data %[3]s
			mount --bind %[2]s/image/postgres %[4]s/postgres
			mount -t tmpfs tmpfs /run
			mkdir -p /run/secrets/kubernetes.io/serviceaccount
			printf prod > /run/secrets/kubernetes.io/serviceaccount/namespace
			echo %[5]s > %[2]s/hostname
			mount --bind %[2]s/hostname /etc/hostname
			exec setpriv --reuid=postgres --regid=postgres --init-groups %[4]s/postgres -D %[3]s \
				-c listen_addresses= -c unix_socket_directories=%[2]s/sock -c shared_buffers=16MB'`,
		cg, host, podDataDir, bin, name))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pod{name: name, uid: uid, id: id, sock: filepath.Join(host, "sock"), bin: bin}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pod %s's output:\n%s", name, out.String())
		}
	})
	p.stop = sync.OnceFunc(func() {
		if p.postmaster != 0 {
			syscall.Kill(p.postmaster, syscall.SIGINT) // a fast shutdown: pid 1 goes, its namespaces with it
		}
		cmd.Wait()
	})
	t.Cleanup(p.stop)
	waitFor(t, "the server in pod "+name+" to take connections", func() bool {
		if p.postmaster == 0 {
			children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
			p.postmaster, _ = strconv.Atoi(strings.TrimSpace(string(children)))
		}
		_, err := p.psql("SELECT 1")
		return err == nil
	})
	return p
}

func (p *pod) psql(sql string) (string, error) {
	b, err := exec.Command(filepath.Join(p.bin, "psql"), "-h", p.sock, "-U", "postgres", "-d", "postgres", "-Atc", sql).CombinedOutput()
	return strings.TrimSpace(string(b)), err
}

// server is the pod's server label.
func (p *pod) server() string { return "prod/" + p.name + ":" + podDataDir }

// Two pods on a node, their data directories at the same path (seen only
// inside): dbiolat finds both by default, reaches each one's binary
// through /proc/PID (their wait events are named), and says which
// container and pod each query ran in, with the data directory as the
// server sees it, in records and in serve's series; it follows a pod's
// container restarting.
func TestContainerInNamespaces(t *testing.T) {
	testenv.NeedRoot(t)
	pods := []*pod{
		startPod(t, "pg-0", "7c6b5a49-3827-4165-a4b3-c2d1e0f9a8b7", "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"),
		startPod(t, "pg-1", "8d7c6b5a-4938-4276-b5c4-d3e2f1a0b9c8", "1a2b3c4d5e6f70819203a4b5c6d7e8f91a2b3c4d5e6f70819203a4b5c6d7e8f9"),
	}
	if _, err := os.Stat(podDataDir + "/PG_VERSION"); err == nil {
		t.Fatalf("the pods' data directory %s is seen from the host", podDataDir)
	}

	tr := startTrace(t, "slowlog", "--json", "--min-query", "0") // no --pid: found by discovery
	for _, p := range pods {
		if _, err := p.psql("SELECT pg_sleep(0.1)"); err != nil {
			t.Fatal(err)
		}
	}
	qs, _, _ := tr.stop(t)
	for _, p := range pods {
		want := container.Info{Runtime: "containerd", ID: p.id, PodUID: p.uid, QoS: "burstable", Namespace: "prod", Pod: p.name}
		i := slices.IndexFunc(qs, func(q model.Query) bool { return q.Query == "SELECT pg_sleep($1)" && q.Instance == p.postmaster })
		if i < 0 {
			t.Errorf("no record of pod %s's query among %d\n%s", p.name, len(qs), tr.stderr.String())
			continue
		}
		q := qs[i]
		if q.Container == nil || *q.Container != want || q.DataDir != podDataDir {
			t.Errorf("the query's container %+v, data directory %s; want %+v, %s", q.Container, q.DataDir, want, podDataDir)
		}
		if q.Waits["Timeout/PgSleep"] == 0 {
			t.Errorf("pod %s's sleep is not named from its binary's wait events: %v", p.name, q.Waits)
		}
	}

	// serve: each server's info series names its pod; queries and I/O carry its name.
	s := startTrace(t, "serve", "--fs", "--duty", "off", "--listen", "127.0.0.1:0", "--window", "1s")
	url := servingRe.FindStringSubmatch(s.stderr.String())[1]
	for _, p := range pods {
		if _, err := p.psql("CREATE TABLE t AS SELECT g FROM generate_series(1, 10000) g; SELECT count(*) FROM t"); err != nil {
			t.Fatal(err)
		}
	}
	has := func(fams map[string]*dto.MetricFamily, name string, labels map[string]string) bool {
		return slices.ContainsFunc(fams[name].GetMetric(), func(m *dto.Metric) bool {
			n := 0
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
					n++
				}
			}
			return n == len(labels)
		})
	}
	var fams map[string]*dto.MetricFamily
	waitFor(t, "serve to count the pods' queries", func() bool {
		fams = scrape(t, url)
		return !slices.ContainsFunc(pods, func(p *pod) bool {
			return !has(fams, "dbiolat_fingerprint_calls_total", map[string]string{"server": p.server(), "database": "postgres"})
		})
	})
	info := func(p *pod) map[string]string {
		return map[string]string{"server": p.server(), "kind": "PostgreSQL", "data_dir": podDataDir, "pid": strconv.Itoa(p.postmaster),
			"container_runtime": "containerd", "container_id": p.id, "k8s_pod_uid": p.uid, "k8s_namespace": "prod", "k8s_pod": p.name}
	}
	for _, p := range pods {
		if !has(fams, "dbiolat_server_info", info(p)) {
			t.Errorf("no dbiolat_server_info with %v: %v", info(p), fams["dbiolat_server_info"])
		}
		if !has(fams, "dbiolat_io_operations_total", map[string]string{"server": p.server(), "layer": "fs"}) {
			t.Errorf("no file system I/O of server %q: %v", p.server(), fams["dbiolat_io_operations_total"])
		}
		if !has(fams, "dbiolat_fs_read_duration_seconds", map[string]string{"server": p.server(), "database": "postgres", "role": "client backend"}) {
			t.Errorf("no read histogram of server %q's backends: %v", p.server(), fams["dbiolat_fs_read_duration_seconds"])
		}
	}
	// pg-0's container restarts: its server stops, the pod starts another
	// container (another id). serve follows it, under the same server name.
	calls := func(server string) (n float64) {
		for _, m := range scrape(t, url)["dbiolat_fingerprint_calls_total"].GetMetric() {
			if slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "server" && l.GetValue() == server }) {
				n += m.GetCounter().GetValue()
			}
		}
		return n
	}
	before := calls(pods[0].server())
	pods[0].stop()
	again := startPod(t, "pg-0", pods[0].uid, "2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f")
	waitFor(t, "serve to trace pg-0's new container", func() bool { return has(scrape(t, url), "dbiolat_server_info", info(again)) })
	// A query each look: the new fingerprint's calls count in "other"
	// until the window's end gives it a series under the server's name.
	waitFor(t, "serve to count pg-0's queries after the restart", func() bool {
		if _, err := again.psql("SELECT 'again'"); err != nil {
			t.Fatal(err)
		}
		return calls(again.server()) > before
	})
	if !strings.Contains(s.stderr.String(), fmt.Sprintf("PostgreSQL on %s is back as pid %d", again.server(), again.postmaster)) {
		t.Errorf("serve did not say pg-0 is back:\n%s", s.stderr.String())
	}
	s.stopText(t)

	// --pgdata with the path as the pods' servers see it: two share it,
	// then, pg-0 gone, it names pg-1's.
	wantOneSentence(t, exec.Command(binary, "hist", "--pgdata", podDataDir),
		fmt.Sprintf("2 PostgreSQL servers use %s as their data directory (in containers: PIDs", podDataDir))
	again.stop()
	tr = startTrace(t, "slowlog", "--json", "--min-query", "0", "--pgdata", podDataDir)
	if _, err := pods[1].psql("SELECT 'by its data directory'"); err != nil {
		t.Fatal(err)
	}
	qs, _, _ = tr.stop(t)
	if len(matching(qs, "SELECT $1")) == 0 || slices.ContainsFunc(qs, func(q model.Query) bool { return q.Instance != pods[1].postmaster }) {
		t.Errorf("--pgdata %s: %d queries, want pg-1's (pid %d): %+v", podDataDir, len(qs), pods[1].postmaster, qs)
	}
}

// myPod is a MariaDB in a pod as CRI-O and the kubelet make one (its own
// pid, mount and cgroup namespaces, its data directory seen only inside),
// under an init of the container's (a shell, as tini or dumb-init would
// be) that starts the server again whenever it exits, until the pod
// stops: the server restarts in the same namespaces, on the same data
// directory.
type myPod struct {
	name, uid, id string
	host          string // the pod's files, seen from the host: its socket
	sock          string
	init          int // the container's pid 1, as the host sees it
	server        int // mariadbd's pid, as the host sees it
}

// myPodDataDir is the pod's data directory, as the official image has it.
const myPodDataDir = "/var/lib/mysql"

// startMyPod starts a MariaDB pod in namespace "prod"; it stops at the
// end of the test.
func startMyPod(t *testing.T, name, uid, id string) *myPod {
	t.Helper()
	testenv.NeedRoot(t)
	if _, err := exec.LookPath("mariadbd"); err != nil {
		if _, err := os.Stat("/usr/sbin/mariadbd"); err != nil {
			t.Fatalf("MariaDB is not installed (scripts/install-deps installs it): %v", err)
		}
	}
	p := &myPod{name: name, uid: uid, id: id, host: reachableTempDir(t, "mypod-")}
	p.sock = filepath.Join(p.host, "mysqld.sock")
	// --tmpdir: its own, as a server at start removes the "#sql" files of
	// its tmpdir, another server's too (internal/sidroot/mysql.go).
	if out, err := exec.Command("mariadb-install-db", "--no-defaults", "--auth-root-authentication-method=normal", "--skip-test-db",
		"--datadir="+p.host+"/data", "--tmpdir="+p.host).CombinedOutput(); err != nil {
		t.Fatalf("making the pod's data directory: %v\n%s", err, out)
	}
	cg := podCgroup(t, "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"+strings.ReplaceAll(uid, "-", "_")+
		".slice/crio-"+id+".scope")
	cmd := exec.Command("sh", "-ec", fmt.Sprintf(`echo $$ > %[1]s/cgroup.procs
		mkdir -p %[3]s
		exec unshare --pid --fork --mount --cgroup --propagation private sh -ec '
			mount -t tmpfs -o mode=755 data %[3]s
			cp -a %[2]s/data/. %[3]s
			mount -t tmpfs tmpfs /run
			mkdir -p /run/secrets/kubernetes.io/serviceaccount
			printf prod > /run/secrets/kubernetes.io/serviceaccount/namespace
			echo %[4]s > %[2]s/hostname
			mount --bind %[2]s/hostname /etc/hostname
			while [ ! -e %[2]s/stop ]; do
				mariadbd --no-defaults --user=root --datadir=%[3]s --socket=%[5]s --skip-networking \
					--pid-file=%[3]s/mariadbd.pid --log-error=%[3]s/error.log --tmpdir=%[2]s || true
				sleep 0.2
			done'`,
		cg, p.host, myPodDataDir, name, p.sock))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(p.host, "stop"), nil, 0o644)
		if p.server != 0 {
			syscall.Kill(p.server, syscall.SIGTERM) // a clean shutdown; the init ends, its namespaces with it
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute): // every process of the pod's cgroup, whatever the test knew of them
			procs, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
			for _, f := range strings.Fields(string(procs)) {
				pid, _ := strconv.Atoi(f)
				syscall.Kill(pid, syscall.SIGKILL)
			}
			<-done
		}
		if t.Failed() {
			t.Logf("pod %s's output:\n%s", name, out.String())
		}
	})
	waitFor(t, "the pod's init to start", func() bool {
		// Before its exec of unshare, the shell's children are its own commands.
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid)); filepath.Base(exe) != "unshare" {
			return false
		}
		children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		p.init, _ = strconv.Atoi(strings.TrimSpace(string(children)))
		return p.init != 0
	})
	p.waitServer(t, 0)
	return p
}

// waitServer waits for a server other than pid old to take connections,
// and makes it the pod's server.
func (p *myPod) waitServer(t *testing.T, old int) {
	t.Helper()
	waitFor(t, "the MariaDB of pod "+p.name+" to take connections", func() bool {
		p.server = 0
		children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.init, p.init))
		for _, f := range strings.Fields(string(children)) {
			pid, _ := strconv.Atoi(f)
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); pid != old && filepath.Base(exe) == "mariadbd" {
				p.server = pid
			}
		}
		if p.server == 0 {
			return false
		}
		_, err := p.sql("SELECT 1")
		return err == nil
	})
}

// sql runs a script on the pod's server through one mariadb client.
func (p *myPod) sql(script string) (string, error) {
	cmd := exec.Command("mariadb", "--no-defaults", "--protocol=socket", "--socket="+p.sock, "--user=root", "--batch", "--skip-column-names")
	cmd.Stdin = strings.NewReader(script)
	b, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(b)), err
}

// killAndStart kills the pod's server with SIGKILL; its init starts it
// again, in the same namespaces, on the same data directory.
func (p *myPod) killAndStart(t *testing.T) {
	t.Helper()
	old := p.server
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.waitServer(t, old)
}

// label is the pod's server name (model.ServerName).
func (p *myPod) label() string { return "prod/" + p.name + ":" + myPodDataDir }

// A MariaDB in a pod as CRI-O and the kubelet make one (its own pid,
// mount and cgroup namespaces, its data directory seen only inside): found
// by its PID, its records and serve's series name its container, its pod
// and its data directory as it sees it.
func TestMariaDBInPod(t *testing.T) {
	const name, uid, id, dataDir = "my-0", "9e8d7c6b-5a49-4387-a6b5-c4d3e2f1a0b9", "3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a", myPodDataDir
	p := startMyPod(t, name, uid, id)
	client, server := p.sql, p.server
	want := container.Info{Runtime: "cri-o", ID: id, PodUID: uid, QoS: "besteffort", Namespace: "prod", Pod: name}

	// The data directory as the pod's server sees it (the host's own
	// /var/lib/mysql, if it has one, is another directory).
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--datadir", dataDir)
	if _, err := client("SELECT SLEEP(0.1)"); err != nil {
		t.Fatal(err)
	}
	qs, _, _ := tr.stop(t)
	i := slices.IndexFunc(qs, func(q model.Query) bool { return strings.HasPrefix(q.Query, "SELECT SLEEP") })
	if i < 0 {
		t.Fatalf("no record of the pod's query among %d\n%s", len(qs), tr.stderr.String())
	}
	if q := qs[i]; q.Container == nil || *q.Container != want || q.DataDir != dataDir {
		t.Errorf("the query's container %+v, data directory %s; want %+v, %s", q.Container, q.DataDir, want, dataDir)
	}

	s := startTrace(t, "serve", "--duty", "off", "--listen", "127.0.0.1:0", "--window", "1s", "--pid", strconv.Itoa(server))
	url := servingRe.FindStringSubmatch(s.stderr.String())[1]
	label := p.label()
	var fams map[string]*dto.MetricFamily
	waitFor(t, "serve to count the pod's queries", func() bool {
		if _, err := client("SELECT COUNT(*) FROM mysql.user"); err != nil {
			t.Fatal(err)
		}
		fams = scrape(t, url)
		return slices.ContainsFunc(fams["dbiolat_fingerprint_calls_total"].GetMetric(), func(m *dto.Metric) bool { return labelOf(m, "server") == label })
	})
	if !slices.ContainsFunc(fams["dbiolat_server_info"].GetMetric(), func(m *dto.Metric) bool {
		return labelOf(m, "server") == label && labelOf(m, "kind") == "MariaDB" && labelOf(m, "data_dir") == dataDir &&
			labelOf(m, "container_runtime") == "cri-o" && labelOf(m, "container_id") == id && labelOf(m, "k8s_pod") == name
	}) {
		t.Errorf("no dbiolat_server_info of the pod's MariaDB: %v", fams["dbiolat_server_info"])
	}
	s.stopText(t)
}
