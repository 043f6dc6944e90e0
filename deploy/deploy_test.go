package deploy

import (
	"bytes"
	"cmp"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The DaemonSet is valid Kubernetes (every field known to the API's own
// types, every value of its type) and asks exactly the privileges
// TestLeastPrivilege established, and the file reading discovery needs
// (TestContainerImage), with limits and a liveness probe.
func TestDaemonSet(t *testing.T) {
	ds, err := Manifest()
	if err != nil {
		t.Fatal(err)
	}
	checkDaemonSet(t, ds)
}

// checkDaemonSet checks what the manifest promises and the chart renders.
func checkDaemonSet(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	if ds.APIVersion != "apps/v1" || ds.Kind != "DaemonSet" {
		t.Errorf("apiVersion %q kind %q", ds.APIVersion, ds.Kind)
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostPID || len(spec.Containers) != 1 {
		t.Fatalf("want hostPID and one container: %+v", spec)
	}
	if sel := ds.Spec.Selector.MatchLabels; sel["app.kubernetes.io/name"] != ds.Spec.Template.Labels["app.kubernetes.io/name"] {
		t.Errorf("the selector %v does not select the pods %v", sel, ds.Spec.Template.Labels)
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	want := []corev1.Capability{"BPF", "PERFMON", "SYS_PTRACE", "DAC_READ_SEARCH"}
	if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		!slices.Equal(sc.Capabilities.Add, want) || sc.Privileged != nil && *sc.Privileged {
		t.Errorf("capabilities: %+v, want all dropped but %v", sc, want)
	}
	if c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("no resource limits: %+v", c.Resources)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("no liveness probe on /healthz: %+v", p)
	}
	if !slices.Contains(c.Args, "serve") {
		t.Errorf("the container does not run serve: %v", c.Args)
	}
}

// Helm v3 from the Go module proxy, built once into the repository's
// .tools (as the Makefile builds Prometheus 3): no Debian package has it.
const helmModule, helmVersion = "helm.sh/helm/v3/cmd/helm", "v3.22.0"

// helm builds Helm if .tools lacks it and returns its path.
func helm(t *testing.T) string {
	t.Helper()
	tools, err := filepath.Abs(filepath.Join("..", ".tools"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tools, "helm-"+helmVersion)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	gobin := t.TempDir()
	install := exec.Command("go", "install", helmModule+"@"+helmVersion)
	install.Env = append(os.Environ(), "GOBIN="+gobin, "CGO_ENABLED=0")
	if out, err := install.CombinedOutput(); err != nil {
		if os.Getenv("CI") != "true" { // a developer's machine off the network
			t.Skipf("building Helm %s: %v\n%s", helmVersion, err, out)
		}
		t.Fatalf("building Helm %s: %v\n%s", helmVersion, err, out)
	}
	os.MkdirAll(tools, 0o755)
	if out, err := exec.Command("mv", filepath.Join(gobin, "helm"), bin).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return bin
}

// render runs helm template on the chart with these --set values and
// returns its documents by kind.
func render(t *testing.T, helmBin string, set ...string) map[string][]byte {
	t.Helper()
	args := []string{"template", "dbiolat", "helm/dbiolat", "--namespace", "monitoring"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(helmBin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %v: %v: %s", args, err, stderr.String())
	}
	docs := map[string][]byte{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("a document helm rendered: %v\n%s", err, doc)
		}
		if head.Kind == "" {
			continue // a template rendering to nothing
		}
		if docs[head.Kind] != nil {
			t.Fatalf("two %s documents", head.Kind)
		}
		docs[head.Kind] = []byte(doc)
	}
	return docs
}

// The Helm chart passes helm lint, and its defaults render the manifest's
// pods: the same pod spec, field for field (privileges, volumes, mounts,
// probes, resources, tolerations; the image is the values'), decoded
// strictly into Kubernetes's own types. A Service selects those pods and
// the optional ServiceMonitor scrapes the Service's metrics port; values
// change what they name and nothing else.
func TestHelmChart(t *testing.T) {
	helmBin := helm(t)
	if out, err := exec.Command(helmBin, "lint", "--strict", "helm/dbiolat").CombinedOutput(); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	want, err := Manifest()
	if err != nil {
		t.Fatal(err)
	}

	docs := render(t, helmBin)
	if docs["ServiceMonitor"] != nil {
		t.Errorf("a ServiceMonitor by default: the Prometheus Operator's CRD may not be installed")
	}
	var ds appsv1.DaemonSet
	if err := Decode(docs["DaemonSet"], &ds); err != nil {
		t.Fatalf("%v\n%s", err, docs["DaemonSet"])
	}
	checkDaemonSet(t, &ds)
	if ds.Namespace != "monitoring" || !equalJSON(t, "the pods' selector", ds.Spec.Selector, want.Spec.Selector) ||
		!equalJSON(t, "the pod template's metadata", ds.Spec.Template.ObjectMeta, want.Spec.Template.ObjectMeta) {
		t.Errorf("the chart's DaemonSet is not the manifest's: namespace %q", ds.Namespace)
	}
	equalJSON(t, "the pod spec", ds.Spec.Template.Spec, want.Spec.Template.Spec)

	var svc corev1.Service
	if err := Decode(docs["Service"], &svc); err != nil {
		t.Fatalf("%v\n%s", err, docs["Service"])
	}
	if !equalJSON(t, "the Service's selector", svc.Spec.Selector, want.Spec.Selector.MatchLabels) ||
		len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != "metrics" {
		t.Errorf("the Service does not reach the pods' metrics port: %+v", svc.Spec)
	}

	// Values: the image, the duty cycle, the fs layer, the port, a ServiceMonitor.
	docs = render(t, helmBin, "image.repository=registry.example/dbiolat", "image.tag=v1", "duty=1s/10s", "fs=true", "port=9500",
		"serviceMonitor.enabled=true", "serviceMonitor.labels.release=prom")
	var custom appsv1.DaemonSet
	if err := Decode(docs["DaemonSet"], &custom); err != nil {
		t.Fatal(err)
	}
	c := custom.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example/dbiolat:v1" || !slices.Equal(c.Args, []string{"serve", "--listen", "0.0.0.0:9500", "--duty", "1s/10s", "--fs"}) ||
		c.Ports[0].ContainerPort != 9500 {
		t.Errorf("values not rendered: image %q, args %v, port %d", c.Image, c.Args, c.Ports[0].ContainerPort)
	}
	equalJSON(t, "the privileges with other values", c.SecurityContext, want.Spec.Template.Spec.Containers[0].SecurityContext)
	var sm struct { // the Prometheus Operator's types are not a dependency: the fields it reads
		APIVersion, Kind string
		Metadata         struct{ Labels map[string]string }
		Spec             struct {
			Selector  struct{ MatchLabels map[string]string }
			Endpoints []struct{ Port, Path, Interval string }
		}
	}
	if err := yaml.Unmarshal(docs["ServiceMonitor"], &sm); err != nil {
		t.Fatal(err)
	}
	var svc2 corev1.Service
	if err := Decode(docs["Service"], &svc2); err != nil {
		t.Fatal(err)
	}
	selects := true
	for k, v := range sm.Spec.Selector.MatchLabels {
		selects = selects && svc2.Labels[k] == v
	}
	if sm.APIVersion != "monitoring.coreos.com/v1" || !selects || len(sm.Spec.Endpoints) != 1 ||
		sm.Spec.Endpoints[0].Port != svc2.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" ||
		sm.Metadata.Labels["release"] != "prom" || svc2.Spec.Ports[0].Port != 9500 {
		t.Errorf("the ServiceMonitor does not scrape the Service's metrics port: %+v, service %+v", sm, svc2.ObjectMeta.Labels)
	}

	// A ServiceMonitor without a Service to scrape is refused, in a sentence.
	out, err := exec.Command(helmBin, "template", "dbiolat", "helm/dbiolat", "--set", "serviceMonitor.enabled=true", "--set", "service.enabled=false").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "serviceMonitor.enabled needs service.enabled") {
		t.Errorf("a ServiceMonitor without a Service: %v %s", err, out)
	}
}

// equalJSON reports (and says) whether two API values are the same, as
// the API server would store them.
func equalJSON(t *testing.T, what string, got, want any) bool {
	t.Helper()
	g, err1 := json.MarshalIndent(got, "", " ")
	w, err2 := json.MarshalIndent(want, "", " ")
	if err := cmp.Or(err1, err2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s differs from the manifest's:\nchart: %s\nmanifest: %s", what, g, w)
		return false
	}
	return true
}
