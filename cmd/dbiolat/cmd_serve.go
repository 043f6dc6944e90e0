package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dbiolat/dbiolat/internal/exporter"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
)

// defaultListen is where serve's metrics are, unless --listen says: the
// loopback only, so nothing is exposed by default.
const defaultListen = "127.0.0.1:9479"

func runServeCmd(ctx context.Context, args []string) error {
	var o targetOptions
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	o.AddFlags(fs)
	listen := fs.String("listen", defaultListen, "the address to serve /metrics on (host:port; port 0 picks one); default: the loopback only")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q: serve takes only options", pos[0])
	}
	return runServe(ctx, o, *listen)
}

// runServe traces until stopped and serves what it measures to
// Prometheus: every second, the interval's I/O by role and the
// histograms go to the exporter, which a scrape reads.
func runServe(ctx context.Context, o targetOptions, listen string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w (choose another with --listen)", listen, err)
	}
	defer ln.Close()
	e := exporter.New()
	reg := prometheus.NewRegistry()
	// Its own CPU, memory and file descriptors, and the Go runtime's, as every exporter has them.
	reg.MustRegister(e, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	costAt := time.Now() // the kernel counts our programs one second a minute: read it as often
	t := tracer{opts: o, families: probe.All, emit: probe.EmitNone, interval: time.Second,
		onStart: func(*session.Session) error {
			// On stderr: scripts read the address (with --listen host:0 it is chosen now).
			fmt.Fprintf(os.Stderr, "Serving metrics on http://%s/metrics\n", ln.Addr())
			return nil
		},
		onTick: func(s *session.Session) error {
			select {
			case err := <-served:
				return fmt.Errorf("serving metrics: %w", err)
			default:
			}
			iv, err := s.Interval()
			if err != nil {
				return err
			}
			e.Add(iv)
			hs, err := s.Hists()
			if err != nil {
				return err
			}
			e.SetHists(hs)
			if time.Since(costAt) >= time.Minute {
				costAt = time.Now()
				e.SetCost(s.Cost())
			}
			return nil
		}}
	s, err := t.run(ctx)
	if s != nil {
		s.Close()
	}
	if serr := srv.Shutdown(context.Background()); err == nil && serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = serr
	}
	return err
}
