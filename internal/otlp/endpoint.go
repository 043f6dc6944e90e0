package otlp

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Endpoint is where an export goes: a collector's OTLP receiver.
type Endpoint struct {
	URL  *url.URL
	GRPC bool // else HTTP with protobuf
}

// Protocol names the endpoint's protocol as OTEL_EXPORTER_OTLP_PROTOCOL does.
func (e Endpoint) Protocol() string {
	if e.GRPC {
		return "grpc"
	}
	return "http/protobuf"
}

// grpcPort is OTLP's gRPC port: an endpoint on it speaks gRPC.
const grpcPort = "4317"

// ParseEndpoint reads --otlp's URL: http:// or https:// (TLS), a host and
// a port (4318, OTLP/HTTP's, when none). The protocol is HTTP with
// protobuf, the OpenTelemetry SDKs' default, unless
// OTEL_EXPORTER_OTLP_PROTOCOL says grpc or the port is 4317. A mistake is
// one sentence.
func ParseEndpoint(s string) (Endpoint, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.RawQuery != "" || u.Fragment != "" {
		return Endpoint{}, fmt.Errorf("--otlp %q: give the collector's OTLP URL, http://HOST:4318 (HTTP) or http://HOST:4317 (gRPC), https:// for TLS", s)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return Endpoint{}, fmt.Errorf("--otlp %q: port %s is not a port number", s, p)
		}
	} else {
		u.Host = net.JoinHostPort(u.Hostname(), "4318")
	}
	e := Endpoint{URL: u, GRPC: u.Port() == grpcPort}
	switch p := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p {
	case "":
	case "grpc":
		e.GRPC = true
	case "http/protobuf":
		e.GRPC = false
	default:
		return Endpoint{}, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s: dbiolat speaks grpc and http/protobuf", p)
	}
	if e.GRPC && u.Path != "" && u.Path != "/" {
		return Endpoint{}, fmt.Errorf("--otlp %q: a gRPC endpoint has no path", s)
	}
	return e, nil
}

// retry is how the exporters retry a batch the collector did not take:
// soon at first, then every 10 s at most, for 30 s in all, after which
// the batch is dropped (export_failed) and the queue moves on. Records
// arriving meanwhile wait in the queue, or are dropped when it is full.
var retry = struct{ initial, max, elapsed time.Duration }{time.Second, 10 * time.Second, 30 * time.Second}

// Exporters are the SDK's OTLP exporters for an endpoint. The endpoint,
// its protocol and TLS are --otlp's; the rest is the SDK's
// OTEL_EXPORTER_OTLP_* environment (headers, timeout, certificate,
// compression), which the exporters read themselves.
func Exporters(ctx context.Context, e Endpoint) (sdktrace.SpanExporter, sdklog.Exporter, error) {
	host, insecure := e.URL.Host, e.URL.Scheme == "http"
	if e.GRPC {
		topts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(host), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{
			Enabled: true, InitialInterval: retry.initial, MaxInterval: retry.max, MaxElapsedTime: retry.elapsed})}
		lopts := []otlploggrpc.Option{otlploggrpc.WithEndpoint(host), otlploggrpc.WithRetry(otlploggrpc.RetryConfig{
			Enabled: true, InitialInterval: retry.initial, MaxInterval: retry.max, MaxElapsedTime: retry.elapsed})}
		if insecure {
			topts, lopts = append(topts, otlptracegrpc.WithInsecure()), append(lopts, otlploggrpc.WithInsecure())
		}
		t, err := otlptracegrpc.New(ctx, topts...)
		if err != nil {
			return nil, nil, fmt.Errorf("--otlp %s: %w", e.URL, err)
		}
		l, err := otlploggrpc.New(ctx, lopts...)
		if err != nil {
			return nil, nil, fmt.Errorf("--otlp %s: %w", e.URL, err)
		}
		return t, l, nil
	}
	// The signal's path after the URL's, as OTEL_EXPORTER_OTLP_ENDPOINT's.
	base := e.URL.Path
	topts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(host), otlptracehttp.WithURLPath(path.Join("/", base, "v1/traces")),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: retry.initial, MaxInterval: retry.max, MaxElapsedTime: retry.elapsed})}
	lopts := []otlploghttp.Option{otlploghttp.WithEndpoint(host), otlploghttp.WithURLPath(path.Join("/", base, "v1/logs")),
		otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: true, InitialInterval: retry.initial, MaxInterval: retry.max, MaxElapsedTime: retry.elapsed})}
	if insecure {
		topts, lopts = append(topts, otlptracehttp.WithInsecure()), append(lopts, otlploghttp.WithInsecure())
	}
	t, err := otlptracehttp.New(ctx, topts...)
	if err != nil {
		return nil, nil, fmt.Errorf("--otlp %s: %w", e.URL, err)
	}
	l, err := otlploghttp.New(ctx, lopts...)
	if err != nil {
		return nil, nil, fmt.Errorf("--otlp %s: %w", e.URL, err)
	}
	return t, l, nil
}
