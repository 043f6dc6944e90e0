package oteltest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// waitTimeout is how long WaitLogs, WaitSpans and Jaeger.Trace poll: a
// generous bound, not a latency the test asserts.
const waitTimeout = 60 * time.Second

// Collector is a running OpenTelemetry Collector (make .tools/otelcol)
// that receives OTLP on loopback and writes each export it receives as a
// JSON line (the file exporter: one file for logs, one for traces).
type Collector struct {
	GRPC string // its OTLP/gRPC endpoint, host:port
	HTTP string // its OTLP/HTTP base endpoint, http://host:port: signals go to /v1/logs, /v1/traces

	httpAddr             string // HTTP's host:port
	logsFile, tracesFile string
	proc                 process
}

// CollectorOption changes the Collector StartCollector starts.
type CollectorOption func(*collectorConfig)

type collectorConfig struct {
	forwardTraces string
}

// ForwardTraces has the Collector also export the traces it receives to
// endpoint (OTLP/gRPC, host:port, no TLS): a Jaeger's OTLPGRPC, as a
// user's Collector forwards to a tracing backend.
func ForwardTraces(endpoint string) CollectorOption {
	return func(c *collectorConfig) { c.forwardTraces = endpoint }
}

// StartCollector starts a Collector for the test, stopped at its cleanup.
func StartCollector(t testing.TB, options ...CollectorOption) *Collector {
	t.Helper()
	bin := Tool(t, "otelcol")
	var cfg collectorConfig
	for _, o := range options {
		o(&cfg)
	}
	dir := t.TempDir()
	c := &Collector{
		GRPC:       loopback(freePort(t)),
		logsFile:   filepath.Join(dir, "logs.jsonl"),
		tracesFile: filepath.Join(dir, "traces.jsonl"),
	}
	c.httpAddr = loopback(freePort(t))
	c.HTTP = "http://" + c.httpAddr
	config := filepath.Join(dir, "collector.yaml")
	b, err := json.MarshalIndent(c.config(cfg), "", "  ") // YAML reads JSON
	if err == nil {
		err = os.WriteFile(config, b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	c.proc = process{name: "collector", args: []string{bin, "--config", config}, logFile: filepath.Join(dir, "collector.log")}
	t.Cleanup(func() {
		if err := c.proc.stop(); err != nil {
			t.Error(err)
		}
	})
	c.Start(t)
	return c
}

// config is the Collector's configuration: OTLP in on c's ports, each
// signal to its file, traces to the forwarding endpoint too if any.
func (c *Collector) config(cfg collectorConfig) map[string]any {
	file := func(path string) map[string]any {
		// append: a restarted Collector keeps what it wrote before;
		// flush_interval: what it received is readable soon (default 1 s).
		return map[string]any{"path": path, "append": true, "flush_interval": "100ms"}
	}
	exporters := map[string]any{"file/logs": file(c.logsFile), "file/traces": file(c.tracesFile)}
	tracesTo := []string{"file/traces"}
	if cfg.forwardTraces != "" {
		exporters["otlp_grpc/forward"] = map[string]any{"endpoint": cfg.forwardTraces, "tls": map[string]any{"insecure": true}}
		tracesTo = append(tracesTo, "otlp_grpc/forward")
	}
	return map[string]any{
		"receivers": map[string]any{"otlp": map[string]any{"protocols": map[string]any{
			"grpc": map[string]any{"endpoint": c.GRPC},
			"http": map[string]any{"endpoint": c.httpAddr},
		}}},
		"exporters": exporters,
		"service": map[string]any{
			// No metrics of its own: they would listen on :8888, shared by every test.
			"telemetry": map[string]any{"metrics": map[string]any{"level": "none"}},
			"pipelines": map[string]any{
				"logs":   map[string]any{"receivers": []string{"otlp"}, "exporters": []string{"file/logs"}},
				"traces": map[string]any{"receivers": []string{"otlp"}, "exporters": tracesTo},
			},
		},
	}
}

// Start starts the Collector again after Stop, on the same ports and
// appending to the same files, and returns once it listens on both.
func (c *Collector) Start(t testing.TB) {
	t.Helper()
	if c.proc.cmd != nil {
		t.Fatal("collector: Start while it runs")
	}
	c.proc.start(t, func() bool { return listening(c.GRPC) && listening(c.httpAddr) })
}

// Stop shuts the Collector down (it flushes its exporters first), as an
// outage a sender must survive; what it wrote stays readable.
func (c *Collector) Stop(t testing.TB) {
	t.Helper()
	if err := c.proc.stop(); err != nil {
		t.Fatal(err)
	}
}

// Logs is every log the Collector has written so far, in one plog.Logs:
// the resource logs of each export, in the order received.
func (c *Collector) Logs(t testing.TB) plog.Logs {
	t.Helper()
	all := plog.NewLogs()
	var u plog.JSONUnmarshaler
	for _, line := range jsonLines(t, c.logsFile) {
		logs, err := u.UnmarshalLogs(line)
		if err != nil {
			t.Fatalf("collector: a line of %s: %v", c.logsFile, err)
		}
		logs.ResourceLogs().MoveAndAppendTo(all.ResourceLogs())
	}
	return all
}

// Traces is every span the Collector has written so far, in one
// ptrace.Traces: the resource spans of each export, in the order received.
func (c *Collector) Traces(t testing.TB) ptrace.Traces {
	t.Helper()
	all := ptrace.NewTraces()
	var u ptrace.JSONUnmarshaler
	for _, line := range jsonLines(t, c.tracesFile) {
		traces, err := u.UnmarshalTraces(line)
		if err != nil {
			t.Fatalf("collector: a line of %s: %v", c.tracesFile, err)
		}
		traces.ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	}
	return all
}

// WaitLogs polls Logs until it holds at least n log records, and fails
// the test if it does not within a minute.
func (c *Collector) WaitLogs(t testing.TB, n int) plog.Logs {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		logs := c.Logs(t)
		if logs.LogRecordCount() >= n {
			return logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector: %d log records after %s, want at least %d; its log:\n%s", logs.LogRecordCount(), waitTimeout, n, c.proc.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitSpans polls Traces until it holds at least n spans, and fails the
// test if it does not within a minute.
func (c *Collector) WaitSpans(t testing.TB, n int) ptrace.Traces {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		traces := c.Traces(t)
		if traces.SpanCount() >= n {
			return traces
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector: %d spans after %s, want at least %d; its log:\n%s", traces.SpanCount(), waitTimeout, n, c.proc.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// jsonLines are the whole lines of file: one export each. A last line
// without its newline is being written, and left for the next read.
func jsonLines(t testing.TB, file string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing exported yet
	}
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for {
		line, rest, ok := bytes.Cut(b, []byte("\n"))
		if !ok {
			return lines
		}
		if len(bytes.TrimSpace(line)) > 0 {
			lines = append(lines, line)
		}
		b = rest
	}
}
