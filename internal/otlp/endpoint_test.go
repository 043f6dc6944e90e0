package otlp

import (
	"context"
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	for _, c := range []struct {
		url, env, host, protocol string
	}{
		{"http://127.0.0.1:4318", "", "127.0.0.1:4318", "http/protobuf"},
		{"http://collector", "", "collector:4318", "http/protobuf"},
		{"https://collector:443/otlp", "", "collector:443", "http/protobuf"},
		{"http://127.0.0.1:4317", "", "127.0.0.1:4317", "grpc"},
		{"http://127.0.0.1:9000", "grpc", "127.0.0.1:9000", "grpc"},
		{"http://127.0.0.1:4317", "http/protobuf", "127.0.0.1:4317", "http/protobuf"},
		{"http://[::1]:4318", "", "[::1]:4318", "http/protobuf"},
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", c.env)
		e, err := ParseEndpoint(c.url)
		if err != nil || e.URL.Host != c.host || e.Protocol() != c.protocol {
			t.Errorf("ParseEndpoint(%q) with protocol %q = %v %s, %v; want %s %s", c.url, c.env, e.URL, e.Protocol(), err, c.host, c.protocol)
		}
	}
	for _, c := range []struct{ url, env string }{
		{"127.0.0.1:4318", ""}, {"localhost", ""}, {"ftp://h:1", ""}, {"http://:4318", ""}, {"http://h:0", ""},
		{"http://h:99999", ""}, {"http://h:x", ""}, {"http://h:4318?a=b", ""}, {"http://h:4318", "http/json"},
		{"http://h:4317/path", ""}, {"", ""},
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", c.env)
		_, err := ParseEndpoint(c.url)
		if err == nil || strings.Count(err.Error(), ". ") > 0 || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseEndpoint(%q) with protocol %q: %v, want one sentence", c.url, c.env, err)
		}
	}
}

// The SDK's exporters are made for either protocol without connecting:
// a collector not up yet is retried, not fatal.
func TestExportersDoNotConnect(t *testing.T) {
	for _, url := range []string{"http://127.0.0.1:1", "http://127.0.0.1:4317"} {
		e, err := ParseEndpoint(url)
		if err != nil {
			t.Fatal(err)
		}
		spans, logs, err := Exporters(context.Background(), e)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		spans.Shutdown(context.Background())
		logs.Shutdown(context.Background())
	}
}
