package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/mysandbox"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
)

type demoOptions struct {
	Dir    string
	Engine string // "postgres" or "mariadb"
	Scale  int
	Secs   int
}

func runDemoCmd(ctx context.Context, args []string) error {
	var o demoOptions
	fs := newFlagSet("demo")
	fs.StringVar(&o.Dir, "dir", "", "where to create the throwaway server (default: the temp directory)")
	cobra.MarkFlagDirname(fs, "dir")
	fs.StringVar(&o.Engine, "engine", "postgres", "the server to show it on: postgres (PostgreSQL 15) or mariadb (MariaDB, driven by sysbench)")
	choices(fs, "engine", "postgres", "mariadb")
	fs.IntVar(&o.Scale, "scale", 8, "data size: 8 gives a 120 MB table, several times the server's buffers")
	fs.IntVar(&o.Secs, "seconds", 5, "seconds per workload run")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	return runDemo(ctx, o)
}

// demoServer is a throwaway server the demo runs on, with its data and
// its load generator.
type demoServer interface {
	pid() int
	load(ctx context.Context, scale int) error
	scan(ctx context.Context, cold bool) error
	run(ctx context.Context, readOnly bool, secs int) error
	stop()
}

// runDemo shows the whole tool on a throwaway server: a cold and a warm
// full scan, a read-only and a read-write workload, traced; then the slow
// log, the histograms and what was dropped.
func runDemo(ctx context.Context, o demoOptions) error {
	step := func(f string, a ...any) { fmt.Fprintf(os.Stderr, "==> "+f+"\n", a...) }
	step("starting a throwaway %s", o.Engine)
	c, err := startDemoServer(ctx, o.Engine, o.Dir, o.Scale)
	if err != nil {
		return err
	}
	defer c.stop()

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
	workErr := workWhenAttached(traceCtx, stopTrace, attached, func(ctx context.Context) error {
		err := demoWorkload(ctx, c, o, func(f string, a ...any) { shown(); step(f, a...) })
		shown()
		return err
	})

	slow := slowlogOptions{MinQuery: 50 * time.Millisecond, MinIO: time.Millisecond}
	var reported uint64
	var line []byte
	t := tracer{opts: targetOptions{PID: c.pid()}, families: probe.All, emit: slow.emit(), keepPrivileges: true, drain: drain,
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
func demoWorkload(ctx context.Context, c demoServer, o demoOptions, step func(string, ...any)) error {
	step("cold-cache full scan (page cache dropped)")
	if err := c.scan(ctx, true); err != nil {
		return err
	}
	step("the same scan, warm")
	if err := c.scan(ctx, false); err != nil {
		return err
	}
	step("read-only workload, 2 clients, %ds", o.Secs)
	if err := c.run(ctx, true, o.Secs); err != nil {
		return err
	}
	step("read-write workload, 2 clients, %ds", o.Secs)
	return c.run(ctx, false, o.Secs)
}

// dropPageCache empties the page cache, dirty pages written first.
func dropPageCache() error {
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		return fmt.Errorf("dropping the page cache: %w", err)
	}
	return nil
}

// startDemoServer starts a throwaway server of an engine under dir and
// loads its data (scale); demo and bench run on it.
func startDemoServer(ctx context.Context, engine, dir string, scale int) (demoServer, error) {
	var c demoServer
	switch engine {
	case "postgres": // PostgreSQL 15, shared_buffers 16MB
		pg, err := pgsandbox.Start(ctx, pgsandbox.Options{Dir: dir})
		if err != nil {
			return nil, err
		}
		c = pgDemo{pg}
	case "mariadb": // innodb_buffer_pool_size 32MB
		my, err := mysandbox.Start(mysandbox.Options{Dir: dir})
		if err != nil {
			return nil, err
		}
		c = mariaDemo{my}
	default:
		return nil, fmt.Errorf("--engine %q: postgres or mariadb", engine)
	}
	if err := c.load(ctx, scale); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// workWhenAttached runs work once the trace has attached (attached is
// closed), then ends the trace (stop); work's error comes on the channel,
// nil if the trace ended first.
func workWhenAttached(ctx context.Context, stop context.CancelFunc, attached <-chan struct{}, work func(context.Context) error) <-chan error {
	errc := make(chan error, 1)
	go func() {
		defer stop()
		select {
		case <-attached:
			errc <- work(ctx)
		case <-ctx.Done():
			errc <- nil
		}
	}()
	return errc
}

// pgDemo: PostgreSQL 15 and pgbench.
type pgDemo struct{ c *pgsandbox.Cluster }

func (d pgDemo) pid() int { return d.c.PostmasterPID() }
func (d pgDemo) stop()    { d.c.Stop() }

func (d pgDemo) load(ctx context.Context, scale int) error {
	fmt.Fprintf(os.Stderr, "==> loading data: pgbench -i -s %d\n", scale)
	_, err := d.c.Pgbench(ctx, "postgres", "-i", "-q", "-s", fmt.Sprint(scale))
	return err
}

// pgScan reads all of pgbench_accounts (the filter keeps PostgreSQL from
// answering count(*) any other way).
const pgScan = "SELECT count(*) FROM pgbench_accounts WHERE abalance >= 0"

func (d pgDemo) scan(ctx context.Context, cold bool) error {
	if cold {
		if _, err := d.c.Psql(ctx, "postgres", "CHECKPOINT"); err != nil {
			return err
		}
		if err := dropPageCache(); err != nil {
			return err
		}
	}
	_, err := d.c.Psql(ctx, "postgres", pgScan)
	return err
}

func (d pgDemo) run(ctx context.Context, readOnly bool, secs int) error {
	args := []string{"-c", "2", "-T", fmt.Sprint(secs)}
	if readOnly {
		args = append(args, "-S")
	}
	_, err := d.c.Pgbench(ctx, "postgres", args...)
	return err
}

// mariaDemo: MariaDB and sysbench, one table of 60,000 rows per scale
// unit (about 15 MB).
type mariaDemo struct{ s *mysandbox.Server }

func (d mariaDemo) pid() int { return d.s.PID() }
func (d mariaDemo) stop()    { d.s.Stop() }

func (d mariaDemo) sysbench(ctx context.Context, test string, rows, secs int, phase string) error {
	_, err := d.s.Sysbench(ctx, mysandbox.SysbenchOptions{Test: test, Tables: 1, TableSize: rows, Threads: 2, Time: secs}, phase)
	return err
}

func (d mariaDemo) load(ctx context.Context, scale int) error {
	fmt.Fprintf(os.Stderr, "==> loading data: sysbench prepare, %d rows\n", 60000*scale)
	return d.sysbench(ctx, "oltp_read_only", 60000*scale, 0, "prepare")
}

// mariaScan reads every row of sbtest1 (its clustered index, not k's).
const mariaScan = "SELECT SUM(LENGTH(c)) FROM sbtest1"

func (d mariaDemo) scan(ctx context.Context, cold bool) error {
	if cold { // InnoDB's dirty pages written first
		if _, err := d.s.SQL(ctx, "sbtest", "FLUSH TABLES sbtest1 FOR EXPORT; UNLOCK TABLES"); err != nil {
			return err
		}
		if err := dropPageCache(); err != nil {
			return err
		}
	}
	_, err := d.s.SQL(ctx, "sbtest", mariaScan)
	return err
}

func (d mariaDemo) run(ctx context.Context, readOnly bool, secs int) error {
	test := "oltp_read_write"
	if readOnly {
		test = "oltp_read_only"
	}
	return d.sysbench(ctx, test, 0, secs, "run")
}
