// Package deploy holds what runs dbiolat in a cluster: the DaemonSet
// (kubernetes/), the Helm chart that renders the same pods (helm/), the
// Grafana dashboard (grafana/), the OpenTelemetry Collector config that
// stores serve --otlp's records in ClickHouse (otel/). Its code reads them as Kubernetes would,
// for the tests that hold the chart and the container image to the
// manifest's privileges: the manifest is the one definition of them.
package deploy

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

//go:embed kubernetes/daemonset.yaml
var manifest []byte

// Manifest is the DaemonSet of kubernetes/daemonset.yaml.
func Manifest() (*appsv1.DaemonSet, error) {
	var ds appsv1.DaemonSet
	if err := Decode(manifest, &ds); err != nil {
		return nil, fmt.Errorf("kubernetes/daemonset.yaml: %w", err)
	}
	return &ds, nil
}

// Decode decodes one YAML document into a Kubernetes API type strictly:
// a field the type does not know (a typo, a field at the wrong level) is
// an error, where the API server would drop it without a word.
func Decode(doc []byte, into any) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("not a valid %T: %w", into, err)
	}
	return nil
}
