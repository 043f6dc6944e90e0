package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/pflag"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/otlp"
	"github.com/dbiolat/dbiolat/internal/output"
)

// otlpOptions say where query records go as OpenTelemetry logs and
// spans (--otlp), and which. Only the flag turns the export on: an
// OTEL_EXPORTER_OTLP_ENDPOINT in the environment (a pod's, set for
// another program; a shell's) must not send query texts off the host
// unasked. The OTEL_EXPORTER_OTLP_* variables configure an export the
// flag asked for (headers, TLS, timeout, protocol).
type otlpOptions struct {
	Endpoint  string
	Threshold time.Duration
	Sample    float64
	Rate      float64
	// kernelSamples: the kernel draws the sample (probe.Emit.Sample) and
	// the records it drew say so (serve); Go draws none of its own.
	kernelSamples bool
}

// defaultOTLPThreshold is --otlp-threshold's default: the slow-query
// threshold the demo's slow log uses.
const defaultOTLPThreshold = 50 * time.Millisecond

// AddFlags defines --otlp and its options; chooses: the command chooses
// queries by threshold and sample (serve), else it sends every query it
// reports (slowlog's own thresholds chose them).
func (o *otlpOptions) AddFlags(fs *pflag.FlagSet, chooses bool) {
	fs.StringVar(&o.Endpoint, "otlp", "", "send a log record (db.server.query_sample) and a span per query to this OpenTelemetry collector's URL: "+
		"http://HOST:4318 speaks OTLP over HTTP with protobuf, http://HOST:4317 (or OTEL_EXPORTER_OTLP_PROTOCOL=grpc) gRPC, https:// TLS; "+
		"OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _CERTIFICATE... configure it, OTEL_RESOURCE_ATTRIBUTES describe this host")
	names := []string{"otlp"}
	if chooses {
		fs.DurationVar(&o.Threshold, "otlp-threshold", defaultOTLPThreshold, "with --otlp, send every query at least this long")
		fs.Float64Var(&o.Sample, "otlp-sample", 0.01, "with --otlp, send this share of the other queries too, drawn at random (0 to 1)")
		names = append(names, "otlp-threshold", "otlp-sample")
	}
	fs.Float64Var(&o.Rate, "otlp-rate", 100, "with --otlp, send at most this many queries a second; the rest are counted, not sent")
	group(fs, "OpenTelemetry", append(names, "otlp-rate")...)
}

// start checks the options and starts the export: nil without --otlp.
func (o *otlpOptions) start(ctx context.Context) (*otlp.Exporter, error) {
	switch {
	case o.Endpoint == "":
		return nil, nil
	case o.Sample < 0 || o.Sample > 1:
		return nil, fmt.Errorf("--otlp-sample %g: give a share from 0 to 1 (0.01: one query in a hundred)", o.Sample)
	case o.Rate <= 0:
		return nil, fmt.Errorf("--otlp-rate %g: give a positive number of queries a second", o.Rate)
	case o.Threshold < 0:
		return nil, fmt.Errorf("--otlp-threshold %v: give a duration of 0 or more", o.Threshold)
	}
	e, err := otlp.ParseEndpoint(o.Endpoint)
	if err != nil {
		return nil, err
	}
	version := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = buildVersion(bi, "").Version
	}
	res, err := otlp.Resource(ctx, version)
	if err != nil {
		return nil, err
	}
	spans, logs, err := otlp.Exporters(ctx, e)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	fmt.Fprintf(os.Stderr, "Sending query records to %s (OTLP %s)\n", e.URL, e.Protocol())
	sample := o.Sample
	if o.kernelSamples {
		sample = 0
	}
	return otlp.New(otlp.Config{Threshold: o.Threshold, Sample: sample, Rate: o.Rate, Resource: res, Host: host}, spans, logs), nil
}

// otlpFlushTimeout bounds the export's last flush at exit: a collector
// that is down must not hold the exit.
const otlpFlushTimeout = 5 * time.Second

// closeOTLP flushes the export (nil: none) and returns its counts.
func closeOTLP(x *otlp.Exporter) []model.OTLPCount {
	if x == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), otlpFlushTimeout)
	defer cancel()
	x.Close(ctx)
	return x.Counts()
}

// printOTLP says on stderr what became of the records (a command whose
// summary does not carry them: serve).
func printOTLP(counts []model.OTLPCount) {
	if counts != nil {
		fmt.Fprintln(os.Stderr, output.OTLPText(counts))
	}
}
