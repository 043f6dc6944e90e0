package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dbiolat/dbiolat/internal/exporter"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
)

// defaultListen is where serve's metrics are, unless --listen says: the
// loopback only, so nothing is exposed by default.
const defaultListen = "127.0.0.1:9479"

func runServeCmd(ctx context.Context, args []string) error {
	var o targetOptions
	fs := newFlagSet("serve")
	o.AddFlags(fs)
	fs.Lookup("fs").Usage = "also time every file system call (page-cache hits and misses, writes, syncs: the fs layer's series); costs every syscall on the machine the kernel's slower path, the most of what serve can cost"
	listen := fs.String("listen", defaultListen, "the address to serve /metrics on, host:port (port 0 picks one); the default is on the loopback only")
	top := fs.Int("top", 50, "give series of their own to at most N query fingerprints, the busiest by query time; the rest count as fingerprint=\"other\"")
	window := fs.Duration("window", 10*time.Second, "how often the fingerprints with series are chosen: the busiest of the last window")
	dutyFlag := fs.String("duty", defaultDuty, "trace ON of every PERIOD (ON/PERIOD), the hooks detached in between, counters scaled to the whole time; \"off\": trace all the time")
	choices(fs, "duty", "off", "1s/20s")
	ot := otlpOptions{kernelSamples: true}
	ot.AddFlags(fs, true)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return fmt.Errorf("unexpected argument %q: serve takes only options", pos[0])
	case *top < 1:
		return fmt.Errorf("--top %d: give a positive number of fingerprints", *top)
	case *window <= 0:
		return fmt.Errorf("--window %v: give a positive duration", *window)
	case o.RawSQL:
		return errors.New("serve exports normalized query text only: leave out --raw-sql")
	}
	d, err := parseDuty(*dutyFlag)
	if err != nil {
		return err
	}
	return runServe(ctx, o, *listen, *top, *window, d, ot)
}

// defaultDuty is serve's duty cycle unless --duty says: none, every query
// all the time. The kernel counts queries by their statement's identity
// (probe.Emit.Statements) and sends a record only of those chosen, so
// tracing all the time costs about what the hooks cost (bench/overhead,
// serve). A cycle (1s/20s: a second in twenty) cuts that further, its
// counters then estimates.
const defaultDuty = "off"

// duty is a duty cycle: traced for on in every period; on == period:
// traced all the time.
type duty struct{ on, period time.Duration }

func (d duty) always() bool { return d.on >= d.period }

func parseDuty(s string) (duty, error) {
	if s == "off" {
		return duty{time.Second, time.Second}, nil
	}
	on, period, ok := strings.Cut(s, "/")
	d := duty{}
	var err1, err2 error
	if ok {
		d.on, err1 = time.ParseDuration(on)
		d.period, err2 = time.ParseDuration(period)
	}
	if !ok || err1 != nil || err2 != nil || d.on < time.Second || d.period < d.on {
		return duty{}, fmt.Errorf("--duty %q: give ON/PERIOD, ON at least 1s and at most PERIOD (1s/20s: a second traced in every twenty), or off", s)
	}
	if d.on%time.Second != 0 || d.period%time.Second != 0 {
		return duty{}, fmt.Errorf("--duty %q: give whole seconds (serve measures every second)", s)
	}
	return d, nil
}

// runServe traces until stopped and serves what it measures to
// Prometheus: every second, the interval's I/O by role and the
// histograms go to the exporter, which a scrape reads.
func runServe(ctx context.Context, o targetOptions, listen string, top int, window time.Duration, d duty, ot otlpOptions) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w (choose another with --listen)", listen, err)
	}
	defer ln.Close()
	x, err := ot.start(ctx) // nil without --otlp
	if err != nil {
		return err
	}
	defer func() { printOTLP(closeOTLP(x)) }()
	e := exporter.New(top)
	reg := prometheus.NewRegistry()
	// Its own CPU, memory and file descriptors, and the Go runtime's, as every exporter has them.
	reg.MustRegister(e, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	if x != nil {
		reg.MustRegister(exporter.OTLPCollector(x.Counts))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	var ticked atomic.Int64 // the trace loop's last tick (unix ns): /healthz says it is alive
	ticked.Store(time.Now().UnixNano())
	var servers atomic.Int64 // traced at the last tick
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if since := time.Since(time.Unix(0, ticked.Load())); since > 10*time.Second {
			http.Error(w, fmt.Sprintf("the trace loop last ticked %v ago", since.Round(time.Second)), http.StatusServiceUnavailable)
			return
		}
		if servers.Load() == 0 { // alive: a liveness probe must not restart it for a database not yet there
			fmt.Fprintln(w, "ok: waiting for a database server to start (none is traced)")
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/queries", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(e.Queries()) // fingerprint -> normalized text, never literals
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var costAt time.Time // the kernel counts our programs a while each minute: read it as often (and at once: the maps' size)
	windowAt := time.Now()
	// Duty cycles: a cycle starts attached; after on, the hooks detach
	// and what the cycle measured is taken: the interval since the last
	// pause, its wall time the cycle's, its counts only the attached
	// time's. The traced share is that time over the interval's, measured.
	// The cycle is counted in the trace loop's one-second ticks, not read
	// on the clock: a tick a little early would otherwise find ON not yet
	// past and leave the hooks on for another second (5.2% of pgbench's
	// select-only TPS at 1s/10s, against about 1% on time).
	var resumedAt time.Time
	tick, paused := 0, false
	// The export's account of the queries the kernel counted: those it
	// did not send as records were not chosen. Counted a tick late, so a
	// record still to be drained is not taken for one not chosen.
	var counted, countedBefore, offeredCounted, notChosen uint64
	measure := func(s *session.Session, attached time.Duration) error {
		iv, err := s.Interval()
		if err != nil {
			return err
		}
		hs, err := s.Hists()
		if err != nil {
			return err
		}
		switch {
		case d.always():
			e.SetTraced(1)
		case iv.Seconds > 0:
			e.SetTraced(min(1, attached.Seconds()/iv.Seconds))
		}
		cs, err := s.Statements()
		if err != nil {
			return err
		}
		e.AddStatements(cs)
		if x != nil {
			if n := countedBefore - min(countedBefore, offeredCounted); n > notChosen {
				x.NotChosen(int(n - notChosen))
				notChosen = n
			}
			countedBefore = counted
			for _, c := range cs {
				counted += uint64(c.Sums.Statements)
			}
		}
		e.Add(iv)
		e.SetHists(hs)
		return nil
	}
	// Every query counted in the kernel; records only of those the
	// export chooses (its threshold and sample) and of those no statement
	// identity counts.
	emit := probe.Emit{MinQuery: -1, MinFS: -1, Statements: true}
	if x != nil {
		emit.MinQuery, emit.Sample = ot.Threshold, ot.Sample
	}
	// The default mode's hooks: the file system family (--fs) puts every
	// syscall of the machine on the kernel's slower path, more than the
	// rest of serve costs, so a fleet's always-on exporter leaves it out
	// unless asked; the block layer and the waterfall's I/O waits remain.
	t := tracer{opts: o, families: probe.Default, emit: emit, interval: time.Second, reattach: !d.always(), costWindow: d.period, ratesByServer: true,
		wait: true, quietTicks: true,
		onQuery: func(q *model.Query) error {
			e.Observe(q)
			if x != nil {
				x.Offer(q) // never waits: chosen, queued or counted as dropped
				if q.Counted {
					offeredCounted += uint64(q.Statements)
				}
			}
			return nil
		},
		onStart: func(s *session.Session) error {
			resumedAt = time.Now()
			servers.Store(int64(len(s.Servers())))
			// On stderr: scripts read the address (with --listen host:0 it is chosen now).
			fmt.Fprintf(os.Stderr, "Serving metrics on http://%s/metrics\n", ln.Addr())
			return nil
		},
		onTick: func(s *session.Session) error {
			ticked.Store(time.Now().UnixNano())
			traced := s.Servers() // one may have started, exited or come back
			servers.Store(int64(len(traced)))
			e.SetServers(traced)
			e.SetLayers((^probe.Families(0)).Names(), s.Layers()) // a family comes with a server of its engine
			select {
			case err := <-served:
				return fmt.Errorf("serving metrics: %w", err)
			default:
			}
			tick++
			switch {
			case d.always():
				if err := measure(s, 0); err != nil {
					return err
				}
			case !paused && time.Duration(tick)*time.Second >= d.on:
				// The traced window closes as Pause begins, though the
				// hooks take a second to come off (one RCU grace period
				// each): what ends later is left out in the kernel.
				pausing := time.Now()
				if err := s.Pause(); err != nil {
					return err
				}
				paused = true
				if err := measure(s, pausing.Sub(resumedAt)); err != nil {
					return err
				}
			case paused && time.Duration(tick)*time.Second >= d.period:
				tick, paused = 0, false
				err := s.Resume()
				resumedAt = time.Now() // the window opens as Resume ends, the hooks all back
				if err != nil {
					fmt.Fprintln(os.Stderr, "dbiolat: "+err.Error()) // a hook that cannot come back (a binary replaced): the others trace on
				}
			}
			if time.Since(windowAt) >= window {
				windowAt = time.Now()
				e.EndWindow()
			}
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
