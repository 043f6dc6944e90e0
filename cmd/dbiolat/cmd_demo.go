package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
)

type demoOptions struct {
	Dir   string
	Scale int
	Secs  int
}

func runDemoCmd(ctx context.Context, args []string) error {
	var o demoOptions
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.StringVar(&o.Dir, "dir", "", "where to create the throwaway PostgreSQL (default: the temp directory)")
	fs.IntVar(&o.Scale, "scale", 8, "pgbench scale: 8 gives a 120 MB table, 8x shared_buffers")
	fs.IntVar(&o.Secs, "seconds", 5, "seconds per pgbench run")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	return runDemo(ctx, o)
}

// runDemo shows the whole tool on a throwaway PostgreSQL: a cold and a warm
// full scan, pgbench select-only and TPC-B-like, traced; then the slow log,
// the histograms and what was dropped.
func runDemo(ctx context.Context, o demoOptions) error {
	step := func(f string, a ...any) { fmt.Fprintf(os.Stderr, "==> "+f+"\n", a...) }
	step("starting a throwaway PostgreSQL (shared_buffers 16MB)")
	c, err := pgsandbox.Start(ctx, pgsandbox.Options{Dir: o.Dir})
	if err != nil {
		return err
	}
	defer c.Stop()
	step("loading data: pgbench -i -s %d", o.Scale)
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", fmt.Sprint(o.Scale)); err != nil {
		return err
	}

	traceCtx, stopTrace := context.WithCancel(ctx)
	defer stopTrace()
	attached, drain := make(chan struct{}), make(chan chan struct{})
	// shown returns once the trace has printed every query finished so
	// far: each step's lines appear under its own heading.
	shown := func() {
		done := make(chan struct{})
		select {
		case drain <- done:
			<-done
		case <-traceCtx.Done():
		}
	}
	workErr := make(chan error, 1)
	go func() {
		defer stopTrace()
		select {
		case <-attached:
			workErr <- demoWorkload(traceCtx, c, o, func(f string, a ...any) { shown(); step(f, a...) })
			shown()
		case <-traceCtx.Done():
			workErr <- nil
		}
	}()

	slow := slowlogOptions{MinQuery: 50 * time.Millisecond, MinIO: time.Millisecond}
	var reported uint64
	var line []byte
	t := tracer{opts: targetOptions{PID: c.PostmasterPID()}, families: probe.All, emit: slow.emit(), keepPrivileges: true, drain: drain,
		onStart: func(*session.Session) error { close(attached); return nil },
		onQuery: func(q *model.Query) error {
			reported++
			line = append(output.AppendSlowLine(line[:0], q), '\n')
			_, err := stdout.Write(line)
			return err
		}}
	s, err := t.run(traceCtx)
	if s == nil {
		return err
	}
	defer s.Close()
	if err == nil {
		err = <-workErr
	}
	if ferr := finish(s, targetOptions{}, reported, true, true); ferr != nil {
		return ferr
	}
	return err
}

// demoWorkload runs the demo's steps; step shows what the last one
// traced, then names the next.
func demoWorkload(ctx context.Context, c *pgsandbox.Cluster, o demoOptions, step func(string, ...any)) error {
	step("cold-cache full scan (page cache dropped)")
	if err := coldScan(ctx, c); err != nil {
		return err
	}
	step("the same scan, warm")
	if _, err := c.Psql(ctx, "postgres", scanQuery); err != nil {
		return err
	}
	secs := fmt.Sprint(o.Secs)
	step("pgbench select-only, 2 clients, %ss", secs)
	if _, err := c.Pgbench(ctx, "postgres", "-S", "-c", "2", "-T", secs); err != nil {
		return err
	}
	step("pgbench TPC-B-like, 2 clients, %ss", secs)
	_, err := c.Pgbench(ctx, "postgres", "-c", "2", "-T", secs)
	return err
}

// scanQuery reads all of pgbench_accounts (the filter keeps PostgreSQL
// from answering count(*) any other way).
const scanQuery = "SELECT count(*) FROM pgbench_accounts WHERE abalance >= 0"

// coldScan runs scanQuery with nothing of the table in the page cache:
// dirty pages written first, then the cache dropped.
func coldScan(ctx context.Context, c *pgsandbox.Cluster) error {
	if _, err := c.Psql(ctx, "postgres", "CHECKPOINT"); err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		return fmt.Errorf("dropping the page cache: %w", err)
	}
	_, err := c.Psql(ctx, "postgres", scanQuery)
	return err
}
