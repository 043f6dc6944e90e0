package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbiolat/dbiolat/internal/fio"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/record"
	"github.com/dbiolat/dbiolat/internal/session"
)

type benchOptions struct {
	Dir        string
	Engine     string // "postgres" or "mariadb"
	Output     string
	FioSizeMB  int
	FioSeconds int
	Scale      int
	Scans      int
	Seconds    int
}

func runBenchCmd(ctx context.Context, args []string) error {
	var o benchOptions
	fs := newFlagSet("bench")
	fs.StringVar(&o.Dir, "dir", "", "a directory on the storage to measure (required)")
	fs.StringVarP(&o.Output, "output", "o", "", "the recording file to create (required)")
	cobra.MarkFlagDirname(fs, "dir")
	cobra.MarkFlagFilename(fs, "output")
	fs.IntVar(&o.FioSizeMB, "fio-size", 1024, "size of fio's test file in MiB")
	fs.IntVar(&o.FioSeconds, "fio-seconds", 15, "seconds per fio job")
	fs.StringVar(&o.Engine, "engine", "postgres", "the database to run on the storage: postgres (pgbench) or mariadb (sysbench)")
	choices(fs, "engine", "postgres", "mariadb")
	fs.IntVar(&o.Scale, "scale", 10, "data size: 15 MB each")
	fs.IntVar(&o.Scans, "scans", 3, "cold-cache full scans")
	fs.IntVar(&o.Seconds, "seconds", 15, "seconds per workload run")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return fmt.Errorf("unexpected argument %q: bench takes only options", pos[0])
	case o.Dir == "":
		return errors.New("say which storage to measure with --dir PATH (a directory on it)")
	case o.Output == "":
		return errors.New("say where to write the recording with -o FILE")
	case o.FioSizeMB < 1 || o.FioSeconds < 1 || o.Scale < 1 || o.Scans < 0 || o.Seconds < 1:
		return errors.New("--fio-size, --fio-seconds, --scale and --seconds must be positive, --scans at least 0")
	case o.Engine != "postgres" && o.Engine != "mariadb":
		return fmt.Errorf("--engine %q: bench runs postgres or mariadb", o.Engine)
	}
	if st, err := os.Stat(o.Dir); err != nil || !st.IsDir() {
		return fmt.Errorf("--dir %s is not a directory: create it on the storage to measure", o.Dir)
	}
	if _, err := exec.LookPath("fio"); err != nil {
		return errors.New("fio is not installed: apt-get install fio")
	}
	if err := session.CheckPrivileges(); err != nil {
		return err
	}
	return runBench(ctx, o)
}

// runBench is the storage methodology of the seeds in one command: fio's
// reference on the storage under --dir, with dbiolat tracing fio's
// process, then a throwaway PostgreSQL (or MariaDB) on the same storage
// running cold-cache scans, read-write and read-only load (pgbench, or
// sysbench), traced throughout.
// Everything goes into one recording; two of them go to compare.
func runBench(ctx context.Context, o benchOptions) error {
	steps := 2 + len(fio.Reference) + 2
	n := 0
	step := func(f string, a ...any) {
		n++
		fmt.Fprintf(os.Stderr, "==> [%d/%d] %s\n", n, steps, fmt.Sprintf(f, a...))
	}
	w, err := record.Create(o.Output, record.Environment("", o.Dir))
	if err != nil {
		return err
	}
	defer w.Close()
	w.Meta(map[string]string{"bench_dir": o.Dir})

	size := int64(o.FioSizeMB) << 20
	file := filepath.Join(o.Dir, "dbiolat-fio.dat")
	defer os.Remove(file)
	step("fio: writing a %d MiB test file in %s", o.FioSizeMB, o.Dir)
	if out, err := exec.CommandContext(ctx, "fio", fio.LayoutArgs(file, size)...).CombinedOutput(); err != nil {
		return fmt.Errorf("fio could not write its test file in %s: %s", o.Dir, lastLine(out, err))
	}
	var jobs []model.FioJob
	for _, j := range fio.Reference {
		step("fio %s: %s %d KiB, direct I/O, queue depth %d, %ds", j.Name, j.RW, fio.BlockSize>>10, j.IODepth, o.FioSeconds)
		fj, err := traceFio(ctx, j, file, size, o.FioSeconds)
		if err != nil {
			return err
		}
		jobs = append(jobs, *fj)
		w.Fio(fj)
		if err := w.Flush(); err != nil {
			return err
		}
	}
	os.Remove(file) // room for PostgreSQL

	step("%s: a throwaway server under %s, data of scale %d", o.Engine, o.Dir, o.Scale)
	c, err := startDemoServer(ctx, o.Engine, o.Dir, o.Scale)
	if err != nil {
		return err
	}
	defer c.stop()

	step("tracing it: %d cold-cache full scans, then a read-write and a read-only workload, %ds each", o.Scans, o.Seconds)
	traceCtx, stopTrace := context.WithCancel(ctx)
	defer stopTrace()
	attached := make(chan struct{})
	workErr := workWhenAttached(traceCtx, stopTrace, attached, func(ctx context.Context) error { return benchWorkload(ctx, c, o) })
	// Every family, file system calls too: a bench compares storage layers
	// and runs no production load whose speed the probes could cost.
	ro := recordOptions{targetOptions: targetOptions{PID: c.pid(), FS: true}, Interval: time.Second, keepPrivileges: true}
	sum, err := recordTrace(traceCtx, ro, func(s *session.Session) (*record.Writer, error) {
		w.Meta(record.Environment(s.Server()))
		close(attached)
		return w, nil
	})
	stopTrace()
	if err == nil {
		err = <-workErr
	}
	if err != nil {
		return err
	}

	step("done: %d queries traced; fio's reference beside dbiolat's latencies for fio's process:", sum.Queries)
	output.FioTable(stdout, jobs)
	fmt.Fprintf(stdout, "\nrecording: %s (dbiolat report %s; run bench on another storage and dbiolat compare the two)\n", o.Output, o.Output)
	return nil
}

// traceFio runs one fio job with dbiolat tracing fio's process, so that
// the recording holds fio's latency and dbiolat's block latency of the
// same I/O, each a check on the other.
func traceFio(ctx context.Context, j fio.Job, file string, size int64, seconds int) (*model.FioJob, error) {
	s, err := session.OpenProcesses(probe.FS|probe.Block, probe.EmitNone)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	cmd := exec.CommandContext(ctx, "fio", j.Args(file, size, seconds)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting fio: %w", err)
	}
	// Before fio's job thread starts: it is caught either in /proc or at its creation.
	if err := s.Track(cmd.Process.Pid, false); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("fio %s failed: %s", j.Name, lastLine(errOut.Bytes(), err))
	}
	fj, err := fio.Parse(j, out.Bytes())
	if err != nil {
		return nil, err
	}
	// fio and its job processes have exited: their runs are in the ring.
	err = s.Poll(time.Now(), func(*model.Query) {}, func(p *model.Process) { fj.RunqNs += p.RunqNs })
	if err != nil {
		return nil, err
	}
	h, err := s.Hists()
	if err != nil {
		return nil, err
	}
	fj.Hists = model.Hists{}
	for _, name := range []string{"fs_read", "fs_write", "blk_read", "blk_write"} {
		if h[name].Count > 0 {
			fj.Hists[name] = h[name]
		}
	}
	return fj, nil
}

// benchWorkload is what a DBA would run by hand: full scans with the page
// cache dropped before each, then read-write and read-only load.
func benchWorkload(ctx context.Context, c demoServer, o benchOptions) error {
	for i := 0; i < o.Scans; i++ {
		if err := c.scan(ctx, true); err != nil {
			return err
		}
	}
	if err := c.run(ctx, false, o.Seconds); err != nil {
		return err
	}
	if err := c.run(ctx, true, o.Seconds); err != nil {
		return err
	}
	time.Sleep(2 * drainEvery) // the last records reach the ring buffer and are drained
	return nil
}

// lastLine is the last non-empty line of a tool's output, or err.
func lastLine(out []byte, err error) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return err.Error()
}
