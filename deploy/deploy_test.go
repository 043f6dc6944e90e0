// Package deploy holds what runs dbiolat in a cluster; its test checks
// the manifest against Kubernetes's own types.
package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The DaemonSet is valid Kubernetes (every field known to the API's own
// types, every value of its type) and asks exactly the privileges
// TestLeastPrivilege established, with limits and a liveness probe.
func TestDaemonSet(t *testing.T) {
	b, err := os.ReadFile("kubernetes/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ds); err != nil {
		t.Fatalf("not a valid DaemonSet: %v", err)
	}
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
	want := []corev1.Capability{"BPF", "PERFMON", "SYS_PTRACE"}
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
