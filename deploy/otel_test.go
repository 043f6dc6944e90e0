package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/oteltest"
)

// otel/collector.yaml is a config the Collector accepts: the Collector
// built with the clickhouse exporter (make .tools/otelcol) validates it
// with its own `validate`, with the environment's defaults and with a
// gateway's settings. Copies broken as a user might break them are
// refused, each for its own mistake: the check does check.
func TestCollectorConfigValidates(t *testing.T) {
	otelcol := oteltest.Tool(t, "otelcol")
	b, err := os.ReadFile(filepath.Join("otel", "collector.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	config := string(b)
	validate := func(config string, env ...string) (string, error) {
		file := filepath.Join(t.TempDir(), "collector.yaml")
		if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(otelcol, "validate", "--config", file)
		// Only the variables given: none of the config's may leak in from the caller's.
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := validate(config); err != nil {
		t.Fatalf("otelcol validate refuses otel/collector.yaml with its defaults: %v\n%s", err, out)
	}
	gateway := []string{"OTLP_GRPC_ENDPOINT=0.0.0.0:4317", "OTLP_HTTP_ENDPOINT=0.0.0.0:4318",
		"CLICKHOUSE_ENDPOINT=http://clickhouse.example:8123", "CLICKHOUSE_USERNAME=otel", "CLICKHOUSE_PASSWORD=secret"}
	if out, err := validate(config, gateway...); err != nil {
		t.Fatalf("otelcol validate refuses otel/collector.yaml with %v: %v\n%s", gateway, err, out)
	}

	for _, broken := range []struct {
		what, from, to string
		env            []string
		says           string // what its error names
	}{
		{what: "a pipeline naming an exporter that is not configured", from: "exporters: [clickhouse]", to: "exporters: [clickhouse/missing]", says: "clickhouse/missing"},
		{what: "a field the exporter does not have", from: "create_schema: true", to: "create_schemas: true", says: "create_schemas"},
		{what: "a duration that is none", from: "ttl: 720h", to: "ttl: a month", says: "'ttl'"},
		{what: "an endpoint that is no URL", env: []string{"CLICKHOUSE_ENDPOINT=clickhouse:9000:x"}, says: "exporters::clickhouse"},
	} {
		edited := strings.Replace(config, broken.from, broken.to, 1)
		if broken.from != "" && edited == config {
			t.Fatalf("%s: otel/collector.yaml has no %q to break", broken.what, broken.from)
		}
		out, err := validate(edited, broken.env...)
		if err == nil {
			t.Errorf("otelcol validate accepts %s", broken.what)
		} else if !strings.Contains(out, broken.says) {
			t.Errorf("otelcol validate refuses %s, but does not name %q:\n%s", broken.what, broken.says, out)
		}
	}
}
