package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dbiolat/dbiolat/deploy"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// The image the Containerfile makes, built with podman, run with exactly
// the DaemonSet's privileges (read from deploy/kubernetes/daemonset.yaml,
// so that the two cannot drift): serve inside it finds a PostgreSQL and a
// MariaDB running on the host by itself, names both in
// dbiolat_server_info, and counts their statements as the servers do
// (pg_stat_statements, MariaDB's Com_* counters); the image holds the
// binary alone, its entrypoint, serve by default.
func TestContainerImage(t *testing.T) {
	testenv.NeedRoot(t)
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is needed to build and run the image (scripts/install-deps installs it)")
	}
	if _, err := os.Stat("/sys/kernel/tracing/events"); err != nil {
		t.Fatal("tracefs is not mounted on /sys/kernel/tracing, which the DaemonSet mounts into the container: mount -t tracefs nodev /sys/kernel/tracing")
	}
	ds, err := deploy.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	image := buildImage(t)

	pg := startPG(t, nil)
	ctx := context.Background()
	if _, err := pg.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	my := startMariaDB(t, nil)
	mySQL(t, my, "CREATE DATABASE w")
	// The servers' own counts start here, before serve: their readings
	// are not traced.
	psql(t, pg, "SELECT pg_stat_statements_reset()")
	com0 := comCounters(t, my)
	t.Logf("PostgreSQL pid %d (%s), MariaDB pid %d (%s)", pg.PostmasterPID(), pg.DataDir(), my.PID(), my.DataDir)

	name := fmt.Sprintf("dbiolat-test-%d", os.Getpid())
	t.Cleanup(func() { podman("rm", "--force", "--ignore", name).Run() })
	args := append([]string{"run", "--rm", "--name", name}, podmanLimits(t)...)
	args = append(args, podmanPrivileges(t, ds)...)
	args = append(args, image)
	args = append(args, serveArgs(t, ds.Spec.Template.Spec.Containers[0].Args)...)
	run := podman(args...)
	t.Logf("%s", strings.Join(run.Args, " "))
	tr := startTraceCmd(t, run)
	m := servingRe.FindStringSubmatch(tr.stderr.String())
	if m == nil {
		t.Fatalf("serve in the container does not say where it serves:\n%s", tr.stderr.String())
	}
	url := m[1]

	servers := map[string]string{pg.DataDir(): "PostgreSQL", my.DataDir: "MariaDB"}
	var fams map[string]*dto.MetricFamily
	for end := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		fams = scrape(t, url)
		missing := 0
		for dir, kind := range servers {
			if !hasServerInfo(fams, map[string]string{"server": dir, "kind": kind, "data_dir": dir}) {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("waited a minute for serve in the container to name both servers: dbiolat_server_info %v; serve said:\n%s",
				fams["dbiolat_server_info"].GetMetric(), tr.stderr.String())
		}
	}
	q0, per0 := counterSum(fams, "dbiolat_queries_total"), queriesByServer(fams)

	if _, err := pg.Pgbench(ctx, "postgres", "-n", "-S", "-c", "2", "-t", "200"); err != nil {
		t.Fatal(err)
	}
	script, _ := serveLoad(1)
	mySQL(t, my, script)
	time.Sleep(2500 * time.Millisecond) // a second's tick and a window pass: the exporter has what ran
	fams = scrape(t, url)
	q1, per1 := counterSum(fams, "dbiolat_queries_total"), queriesByServer(fams)

	// The servers' counts, read after serve's.
	pgRan, err := strconv.ParseFloat(psql(t, pg, "SELECT sum(calls) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'"), 64)
	if err != nil {
		t.Fatal(err)
	}
	var myRan uint64
	for name, v := range comCounters(t, my) {
		if strings.HasPrefix(name, "com_") && name != "com_show_status" { // the readings themselves
			myRan += v - com0[name]
		}
	}
	pgSeen, mySeen := per1[pg.DataDir()]-per0[pg.DataDir()], per1[my.DataDir]-per0[my.DataDir]
	t.Logf("in the container: dbiolat_queries_total +%.0f; PostgreSQL's queries +%d (pg_stat_statements %.0f calls), MariaDB's +%d (Com_* %d)",
		q1-q0, pgSeen, pgRan, mySeen, myRan)
	if float64(pgSeen) != pgRan || mySeen != myRan || pgRan == 0 || myRan == 0 {
		t.Errorf("serve in the container counted %d PostgreSQL queries (pg_stat_statements: %.0f) and %d MariaDB queries (Com_*: %d)",
			pgSeen, pgRan, mySeen, myRan)
	}
	resp, err := http.Get(strings.TrimSuffix(url, "/metrics") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("/healthz with two servers traced: %d %q", resp.StatusCode, body)
	}
	// The total holds every server serve traced: exactly ours where no
	// other runs (under CI, where another is a leak of another test).
	var others []string
	for _, m := range fams["dbiolat_server_info"].GetMetric() {
		if servers[labelOf(m, "server")] == "" {
			others = append(others, labelOf(m, "kind")+" "+labelOf(m, "data_dir"))
		}
	}
	switch {
	case len(others) > 0 && os.Getenv("CI") != "true":
		t.Logf("serve traced other servers too (%s): dbiolat_queries_total counts theirs, checked per server only", strings.Join(others, ", "))
	case q1-q0 != pgRan+float64(myRan):
		t.Errorf("dbiolat_queries_total +%.0f, the servers ran %.0f + %d (other servers traced: %v)", q1-q0, pgRan, myRan, others)
	}
	tr.stopText(t) // Ctrl-C to podman, which passes it on: serve exits 0
}

// podman runs podman with the OCI runtime this machine needs: crun,
// podman's default, refuses a cgroup v1 host whose cgroup2 mount has a
// controller ("cgroups in hybrid mode not supported": hugetlb, here);
// runc runs on it.
func podman(args ...string) *exec.Cmd {
	return exec.Command("podman", append([]string{"--runtime=runc"}, args...)...)
}

// podmanLimits are the resource limits the container is started with:
// the test's own. Podman's defaults (1048576 open files, and its own
// process limit, which it lowers to 32768 first) are above what a root
// without CAP_SYS_RESOURCE, as in this machine's sandbox, may set; a pod
// has its runtime's.
func podmanLimits(t *testing.T) []string {
	t.Helper()
	var files, procs unix.Rlimit
	if err := cmp.Or(unix.Getrlimit(unix.RLIMIT_NOFILE, &files), unix.Getrlimit(unix.RLIMIT_NPROC, &procs)); err != nil {
		t.Fatal(err)
	}
	nproc := min(procs.Max, 32768)
	return []string{fmt.Sprintf("--ulimit=nofile=%d:%d", files.Max, files.Max), fmt.Sprintf("--ulimit=nproc=%d:%d", nproc, nproc)}
}

// queriesByServer is the count of the query histogram of each server
// (every query, whatever its fingerprint's series).
func queriesByServer(fams map[string]*dto.MetricFamily) map[string]uint64 {
	n := map[string]uint64{}
	for _, m := range fams["dbiolat_query_duration_seconds"].GetMetric() {
		n[labelOf(m, "server")] += m.GetHistogram().GetSampleCount()
	}
	return n
}

// buildImage builds the Containerfile's image from the test's binary (as
// make image builds it from make build's) and checks what it holds: the
// binary alone, no shell, its entrypoint and default command, its labels.
func buildImage(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // the repository's root as make image sees it: the binary and .containerignore
	for _, f := range [][2]string{{binary, "dbiolat"}, {filepath.Join(root, ".containerignore"), ".containerignore"}} {
		if out, err := exec.Command("cp", f[0], filepath.Join(dir, f[1])).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	os.WriteFile(filepath.Join(dir, "stray"), []byte("not for the image"), 0o644) // .containerignore keeps it out
	image := fmt.Sprintf("localhost/dbiolat-test-%d:latest", os.Getpid())
	// --layers=false: no intermediate image is kept, to be left behind.
	build := podman("build", "--layers=false", "--file", filepath.Join(root, "Containerfile"), "--build-arg", "VERSION=test", "--tag", image, dir)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	t.Cleanup(func() { podman("rmi", "--force", image).Run() })

	out, err := podman("image", "inspect", image).Output()
	if err != nil {
		t.Fatal(err)
	}
	var inspect []struct {
		Size   int64
		Config struct {
			Entrypoint, Cmd []string
			Labels          map[string]string
		}
	}
	if err := json.Unmarshal(out, &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v %s", err, out)
	}
	cfg := inspect[0].Config
	bin, _ := os.Stat(binary)
	t.Logf("image %d bytes, the binary %d; entrypoint %v, command %v", inspect[0].Size, bin.Size(), cfg.Entrypoint, cfg.Cmd)
	if !slices.Equal(cfg.Entrypoint, []string{"/dbiolat"}) || len(cfg.Cmd) == 0 || cfg.Cmd[0] != "serve" {
		t.Errorf("entrypoint %v, command %v: want /dbiolat serve", cfg.Entrypoint, cfg.Cmd)
	}
	if cfg.Labels["org.opencontainers.image.title"] != "dbiolat" || cfg.Labels["org.opencontainers.image.version"] != "test" {
		t.Errorf("labels %v", cfg.Labels)
	}
	// The binary and nothing more: no shell, no libc, no stray file of the
	// build context. The container's files, as podman exports them.
	id, err := podman("create", image).Output()
	if err != nil {
		t.Fatalf("podman create: %v", err)
	}
	defer podman("rm", "--force", strings.TrimSpace(string(id))).Run()
	tar, err := podman("export", strings.TrimSpace(string(id))).Output()
	if err != nil {
		t.Fatalf("podman export: %v", err)
	}
	list := exec.Command("tar", "--list")
	list.Stdin = bytes.NewReader(tar)
	files, err := list.Output()
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(files)); !slices.Equal(f, []string{"dbiolat"}) {
		t.Errorf("the image holds %v, want the binary alone", f)
	}
	return image
}

// podmanPrivileges are podman run's flags for the DaemonSet's pod: each
// field of its spec that grants or takes a privilege, translated; one
// the translation does not know fails the test, so that the manifest
// cannot ask for more than the image was run with.
func podmanPrivileges(t *testing.T, ds *appsv1.DaemonSet) []string {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) > 0 {
		t.Fatalf("the manifest's pod has %d containers and %d init containers: the test runs one", len(spec.Containers), len(spec.InitContainers))
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if spec.HostNetwork || spec.HostIPC || spec.SecurityContext != nil && !reflect.DeepEqual(*spec.SecurityContext, corev1.PodSecurityContext{}) ||
		sc == nil || sc.Privileged != nil && *sc.Privileged || sc.SELinuxOptions != nil || sc.WindowsOptions != nil ||
		sc.RunAsGroup != nil || sc.RunAsNonRoot != nil || sc.ProcMount != nil || sc.AppArmorProfile != nil || sc.Capabilities == nil ||
		sc.RunAsUser == nil || sc.ReadOnlyRootFilesystem == nil || sc.AllowPrivilegeEscalation == nil || sc.SeccompProfile == nil {
		t.Fatalf("the manifest's pod asks for what this test does not translate to podman (pod %+v, container %+v): translate it", spec.SecurityContext, sc)
	}
	// The pod has a network namespace of its own; the test shares the
	// host's instead, to reach serve without a container network (and
	// moves serve to the loopback: serveArgs). The cgroup namespace is
	// podman's default, which on this cgroup v1 host is the host's, as
	// containerd gives a pod on cgroup v1 (a private one on v2:
	// internal/container reads a server's cgroup from inside one too).
	args := []string{"--network=host", fmt.Sprintf("--user=%d", *sc.RunAsUser)}
	if spec.HostPID {
		args = append(args, "--pid=host")
	}
	if *sc.ReadOnlyRootFilesystem {
		args = append(args, "--read-only", "--read-only-tmpfs=false") // Kubernetes mounts no tmpfs
	}
	if !*sc.AllowPrivilegeEscalation {
		args = append(args, "--security-opt=no-new-privileges")
	}
	for _, cp := range sc.Capabilities.Drop {
		args = append(args, "--cap-drop="+string(cp))
	}
	for _, cp := range sc.Capabilities.Add {
		args = append(args, "--cap-add="+string(cp))
	}
	switch sc.SeccompProfile.Type {
	case corev1.SeccompProfileTypeUnconfined:
		args = append(args, "--security-opt=seccomp=unconfined")
	case corev1.SeccompProfileTypeRuntimeDefault: // podman's default
	default:
		t.Fatalf("seccomp profile %+v: not translated", sc.SeccompProfile)
	}
	if cpu := c.Resources.Limits.Cpu(); !cpu.IsZero() {
		args = append(args, fmt.Sprintf("--cpus=%.3f", cpu.AsApproximateFloat64()))
	}
	if mem := c.Resources.Limits.Memory(); !mem.IsZero() {
		args = append(args, fmt.Sprintf("--memory=%db", mem.Value()), fmt.Sprintf("--memory-swap=%db", mem.Value())) // no swap beyond it, as the kubelet
	}
	for _, vm := range c.VolumeMounts {
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
		if i < 0 || spec.Volumes[i].HostPath == nil || vm.SubPath != "" || vm.MountPropagation != nil {
			t.Fatalf("volume mount %+v: only whole hostPath volumes are translated", vm)
		}
		mode := "rw"
		if vm.ReadOnly {
			mode = "ro"
		}
		args = append(args, fmt.Sprintf("--volume=%s:%s:%s", spec.Volumes[i].HostPath.Path, vm.MountPath, mode))
	}
	return args
}

// serveArgs are the manifest's arguments, serve's listen address moved
// to the host's loopback and a port of the kernel's choosing (the test
// shares the host's network: the pod's 0.0.0.0:9479 would take one of
// the host's), traced all the time with a short window, so that the
// counts are exact (a duty cycle's are estimates: TestServeDutyCycles).
func serveArgs(t *testing.T, args []string) []string {
	t.Helper()
	i := slices.Index(args, "--listen")
	if len(args) == 0 || args[0] != "serve" || i < 0 || i+1 >= len(args) || slices.Contains(args, "--duty") {
		t.Fatalf("the manifest's arguments %v: want serve --listen ADDRESS, no --duty", args)
	}
	out := slices.Clone(args)
	out[i+1] = "127.0.0.1:0"
	return append(out, "--duty", "off", "--window", "1s")
}
