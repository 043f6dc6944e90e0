package oteltest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Jaeger is a running Jaeger v2 (make .tools/jaeger) that keeps the
// traces it receives over OTLP in memory and answers its HTTP query API.
type Jaeger struct {
	OTLPGRPC string // its OTLP/gRPC endpoint, host:port: a Collector's ForwardTraces
	OTLPHTTP string // its OTLP/HTTP endpoint, http://host:port
	Query    string // its query API and UI, http://host:port

	proc process
}

// StartJaeger starts a Jaeger for the test, stopped at its cleanup.
func StartJaeger(t testing.TB) *Jaeger {
	t.Helper()
	bin := Tool(t, "jaeger")
	dir := t.TempDir()
	j := &Jaeger{OTLPGRPC: loopback(freePort(t))}
	httpAddr, queryAddr, queryGRPC := loopback(freePort(t)), loopback(freePort(t)), loopback(freePort(t))
	j.OTLPHTTP, j.Query = "http://"+httpAddr, "http://"+queryAddr
	config := map[string]any{
		"receivers": map[string]any{"otlp": map[string]any{"protocols": map[string]any{
			"grpc": map[string]any{"endpoint": j.OTLPGRPC},
			"http": map[string]any{"endpoint": httpAddr},
		}}},
		// No batch processor: a span is queryable as soon as it is received.
		"exporters": map[string]any{"jaeger_storage_exporter": map[string]any{"trace_storage": "memory"}},
		"extensions": map[string]any{
			"jaeger_storage": map[string]any{"backends": map[string]any{"memory": map[string]any{"memory": map[string]any{"max_traces": 100000}}}},
			// Every port on loopback: its defaults listen on all interfaces.
			"jaeger_query": map[string]any{
				"storage": map[string]any{"traces": "memory"},
				"http":    map[string]any{"endpoint": queryAddr},
				"grpc":    map[string]any{"endpoint": queryGRPC},
			},
		},
		"service": map[string]any{
			"extensions": []string{"jaeger_storage", "jaeger_query"},
			"pipelines":  map[string]any{"traces": map[string]any{"receivers": []string{"otlp"}, "exporters": []string{"jaeger_storage_exporter"}}},
			"telemetry":  map[string]any{"metrics": map[string]any{"level": "none"}},
		},
	}
	file := filepath.Join(dir, "jaeger.yaml")
	b, err := json.MarshalIndent(config, "", "  ") // YAML reads JSON
	if err == nil {
		err = os.WriteFile(file, b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Killed at the end: its traces are in memory, and once a Collector has
	// sent to it, a graceful stop waits 10 s for something.
	j.proc = process{name: "jaeger", args: []string{bin, "--config", file}, logFile: filepath.Join(dir, "jaeger.log"), kill: true}
	t.Cleanup(func() {
		if err := j.proc.stop(); err != nil {
			t.Error(err)
		}
	})
	j.proc.start(t, func() bool {
		if !listening(j.OTLPGRPC) || !listening(httpAddr) {
			return false
		}
		resp, err := http.Get(j.Query + "/api/services")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return j
}

// JaegerTrace is a trace as Jaeger's query API (/api/traces/{id}) answers it.
type JaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []JaegerSpan             `json:"spans"`
	Processes map[string]JaegerProcess `json:"processes"` // by JaegerSpan.ProcessID
}

// JaegerSpan is one span of a JaegerTrace. Times are in microseconds.
type JaegerSpan struct {
	TraceID       string            `json:"traceID"`
	SpanID        string            `json:"spanID"`
	OperationName string            `json:"operationName"` // the OTLP span's name
	References    []JaegerReference `json:"references"`
	StartTime     int64             `json:"startTime"` // since the epoch
	Duration      int64             `json:"duration"`
	Tags          []JaegerTag       `json:"tags"` // the span's attributes, its kind, status
	ProcessID     string            `json:"processID"`
}

// JaegerReference is a span's link to another: CHILD_OF names its parent.
type JaegerReference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// JaegerTag is an attribute; numbers are kept as json.Number, exact.
type JaegerTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// JaegerProcess is a span's resource: its service and resource attributes.
type JaegerProcess struct {
	ServiceName string      `json:"serviceName"`
	Tags        []JaegerTag `json:"tags"`
}

// Parent is the span ID of s's parent (its CHILD_OF reference), "" for a root.
func (s JaegerSpan) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Tag is the value of s's tag key, as text, and whether s has it.
func (s JaegerSpan) Tag(key string) (string, bool) {
	return tag(s.Tags, key)
}

// Kind is the span's kind as Jaeger tags it: "server", "client",
// "internal"...; "" if untagged.
func (s JaegerSpan) Kind() string {
	kind, _ := s.Tag("span.kind")
	return kind
}

// Tag is the value of the process's tag key, as text, and whether it has it.
func (p JaegerProcess) Tag(key string) (string, bool) {
	return tag(p.Tags, key)
}

func tag(tags []JaegerTag, key string) (string, bool) {
	for _, t := range tags {
		if t.Key == key {
			return fmt.Sprint(t.Value), true
		}
	}
	return "", false
}

// Trace polls the query API for the trace traceID (32 hex digits) until
// it has at least minSpans spans, and fails the test if it has not within
// a minute: spans of one trace may arrive in several exports.
func (j *Jaeger) Trace(t testing.TB, traceID string, minSpans int) JaegerTrace {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		trace, err := j.fetch(traceID)
		if err == nil && len(trace.Spans) >= minSpans {
			return trace
		}
		if err == nil {
			err = fmt.Errorf("%d spans, want at least %d", len(trace.Spans), minSpans)
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger: trace %s after %s: %v; its log:\n%s", traceID, waitTimeout, err, j.proc.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// fetch asks the query API for one trace once.
func (j *Jaeger) fetch(traceID string) (JaegerTrace, error) {
	resp, err := http.Get(j.Query + "/api/traces/" + traceID)
	if err != nil {
		return JaegerTrace{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return JaegerTrace{}, fmt.Errorf("%s: %s", resp.Status, body)
	}
	var answer struct {
		Data []JaegerTrace `json:"data"`
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&answer); err != nil {
		return JaegerTrace{}, fmt.Errorf("decoding its answer: %w", err)
	}
	if len(answer.Data) != 1 {
		return JaegerTrace{}, fmt.Errorf("%d traces in its answer, want 1", len(answer.Data))
	}
	return answer.Data[0], nil
}
