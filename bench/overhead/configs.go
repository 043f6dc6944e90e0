package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/dbiolat/dbiolat/internal/mysandbox"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/sandbox"
	"github.com/dbiolat/dbiolat/internal/sidroot"
)

// config is one way of tracing the database.
type config struct {
	name   string
	rounds int // run in the first N rounds only; 0: every round
	// command returns the tracer's command line and the line it prints
	// (on stdout or stderr) once attached; nil for the baseline.
	command func(e *env) (args []string, ready string)
	// attach, instead, attaches in this process; the closer detaches.
	attach func() (io.Closer, error)
	// usdt: it needs PostgreSQL's USDT probes (not in every build).
	usdt bool
	// exporter: it serves Prometheus metrics (its ready line says
	// where); its query latencies are read at the end of each run, once
	// settle has passed (a duty cycle measures at its pause).
	exporter bool
	settle   time.Duration
}

var (
	baseline = config{name: "baseline"}
	// dbiolat's default mode: the slow log with the waterfall.
	dbiolatDefault = config{name: "default", command: func(e *env) ([]string, string) {
		return []string{e.dbiolat, "slowlog", "--pid", fmt.Sprint(e.pid())}, "Tracing "
	}}
	// The default mode of another dbiolat binary (-ref: one built from an
	// earlier commit), measured in the same rounds: a change's cost side
	// by side with what it changed.
	dbiolatDefaultRef = config{name: "default-ref", command: func(e *env) ([]string, string) {
		return []string{*refBinary, "slowlog", "--pid", fmt.Sprint(e.pid())}, "Tracing "
	}}
	// Everything dbiolat measures: every query a record, file system
	// calls timed, shared-buffer counts, raw SQL.
	dbiolatAll = config{name: "all", usdt: true, command: func(e *env) ([]string, string) {
		return []string{e.dbiolat, "slowlog", "--min-query", "0", "--fs", "--buffers", "--raw-sql", "--json",
			"--pid", fmt.Sprint(e.pid())}, "Tracing "
	}}
	// The floor of dbiolat's default mode: its kernel hooks (socket
	// calls, context switches, block requests, forks and exits) with
	// programs that return at once. What the machine pays to run any
	// program there, before any work.
	hooksFloor = config{name: "hooks-floor", attach: func() (io.Closer, error) { return attachEmpty(probe.Default) }}
	// The floor of serve --fs: empty programs on every kernel hook it
	// attaches, the default mode's (serve's own) and the file system
	// family's syscall tracepoints (enabling any sends every syscall of
	// the machine down the kernel's slower path). Uprobes serve adds (TLS
	// libraries, waits) are not in it.
	serveFSFloor = config{name: "serve-fs-floor", attach: func() (io.Closer, error) { return attachEmpty(probe.All) }}
	// The floor of any per-query tool built on PostgreSQL's USDT probes:
	// the two uprobe traps per query with programs that do nothing.
	floor = config{name: "usdt-floor", usdt: true, command: func(e *env) ([]string, string) {
		return []string{"bpftrace", "-e", strings.ReplaceAll(floorScript, "BIN", e.postgres)}, "ready"
	}}
	// The floor of the "all" mode's extra hooks, with programs that do
	// nothing: the file system syscall tracepoints (enabling any of them
	// sends every syscall of the machine through the slow path) and the
	// uprobe trap on every shared-buffer access (--buffers).
	allFloor = config{name: "all-floor", usdt: true, command: func(e *env) ([]string, string) {
		return []string{"bpftrace", "-e", allFloorScript(e.postgres)}, "ready"
	}}
	// What users run today (the seeds): query latency from the USDT
	// probes and pread64 time per query, with a line for each query that read.
	bpftrace = config{name: "bpftrace", usdt: true, command: func(e *env) ([]string, string) {
		return []string{"bpftrace", "-e", strings.ReplaceAll(bpftraceScript, "BIN", e.postgres)}, "ready"
	}}
	// The exporter as left running: every query, all the time (counted
	// in the kernel by statement identity), and the same mode of the -ref
	// binary (before the kernel counted: --duty off, a record per query).
	serveEvery = config{name: "serve", exporter: true, settle: 1500 * time.Millisecond, command: func(e *env) ([]string, string) {
		return []string{e.dbiolat, "serve", "--listen", "127.0.0.1:0", "--pid", fmt.Sprint(e.pid())}, "Serving metrics on "
	}}
	// serve with every program emptied (probe's DBIOLAT_BENCH_EMPTY_PROGRAMS,
	// set by env, which execs serve in its own place: the process measured
	// is serve's): its process, hooks' dispatch and uprobes' traps without
	// its programs' work. serve over it is that work; it over hooks-floor
	// is the rest. No metrics to read: it counts nothing.
	serveEmpty = config{name: "serve-empty", command: func(e *env) ([]string, string) {
		return []string{"env", "DBIOLAT_BENCH_EMPTY_PROGRAMS=1", e.dbiolat, "serve", "--listen", "127.0.0.1:0", "--pid", fmt.Sprint(e.pid())}, "Serving metrics on "
	}}
	serveFS = config{name: "serve-fs", exporter: true, settle: 1500 * time.Millisecond, command: func(e *env) ([]string, string) {
		return []string{e.dbiolat, "serve", "--fs", "--listen", "127.0.0.1:0", "--pid", fmt.Sprint(e.pid())}, "Serving metrics on "
	}}
	serveRef = config{name: "serve-ref", exporter: true, settle: 1500 * time.Millisecond, command: func(e *env) ([]string, string) {
		return []string{*refBinary, "serve", "--duty", "off", "--listen", "127.0.0.1:0", "--pid", fmt.Sprint(e.pid())}, "Serving metrics on "
	}}
	// Duty cycles: a second traced in every twenty, and in every ten: how
	// the cost scales with the traced share.
	serveDuty = config{name: "serve-duty", exporter: true, settle: 21 * time.Second, command: func(e *env) ([]string, string) {
		return []string{e.dbiolat, "serve", "--duty", "1s/20s", "--listen", "127.0.0.1:0", "--pid", fmt.Sprint(e.pid())}, "Serving metrics on "
	}}
	serveDuty10 = config{name: "serve-duty10", exporter: true, settle: 11 * time.Second, command: func(e *env) ([]string, string) {
		return []string{e.dbiolat, "serve", "--duty", "1s/10s", "--listen", "127.0.0.1:0", "--pid", fmt.Sprint(e.pid())}, "Serving metrics on "
	}}
	// serve traced all the time with --otlp to a collector (a sink that
	// takes everything: otlpSink): with its default choice (queries over
	// 50 ms, 1% of the others, at most 100 a second), and with every
	// query sent, the export's cost per record. Compare with serve.
	serveOTLP = config{name: "serve-otlp", exporter: true, settle: 1500 * time.Millisecond, command: func(e *env) ([]string, string) {
		return []string{e.dbiolat, "serve", "--duty", "off", "--otlp", e.otlp.url, "--listen", "127.0.0.1:0", "--pid", fmt.Sprint(e.pid())}, "Serving metrics on "
	}}
	serveOTLPAll = config{name: "serve-otlp-all", exporter: true, settle: 1500 * time.Millisecond, command: func(e *env) ([]string, string) {
		return []string{e.dbiolat, "serve", "--duty", "off", "--otlp", e.otlp.url, "--otlp-threshold", "0", "--otlp-sample", "1", "--otlp-rate", "1e6",
			"--listen", "127.0.0.1:0", "--pid", fmt.Sprint(e.pid())}, "Serving metrics on "
	}}
	// The far end of the scale, on fewer rounds: it is slow.
	strace = config{name: "strace", rounds: 3, command: func(e *env) ([]string, string) {
		return []string{"strace", "-f", "-c", "-o", "/dev/null", "-p", fmt.Sprint(e.pid())}, "attached"
	}}
)

const floorScript = `
usdt:BIN:postgresql:query__start {}
usdt:BIN:postgresql:query__done {}
BEGIN { printf("ready\n"); }
`

// allFloorScript is a bpftrace program with empty actions on the hooks
// the file system family adds (probe.Hooks: its syscall and readahead
// tracepoints) and on the shared-buffer probe of --buffers.
func allFloorScript(postgres string) string {
	hooks, err := probe.Hooks(probe.FS)
	if err != nil {
		panic(err) // the embedded object: a broken build, not an input
	}
	var names []string
	for _, h := range hooks {
		if h.Group != "" {
			names = append(names, h.String())
		}
	}
	return "usdt:" + postgres + ":postgresql:buffer__read__done {}\n" + strings.Join(names, ",\n") +
		" {}\nBEGIN { printf(\"ready\\n\"); }\n"
}

const bpftraceScript = `
usdt:BIN:postgresql:query__start { @start[tid] = nsecs; @qtext[tid] = str(arg0); }
tracepoint:syscalls:sys_enter_pread64 /@start[tid]/ { @rs[tid] = nsecs; }
tracepoint:syscalls:sys_exit_pread64 /@rs[tid]/ { @io[tid] += nsecs - @rs[tid]; @n[tid]++; delete(@rs[tid]); }
usdt:BIN:postgresql:query__done /@start[tid]/ {
	$d = nsecs - @start[tid];
	@query_us = hist($d / 1000);
	if (@n[tid] > 0) {
		@pread_us = hist(@io[tid] / 1000);
		printf("%d query %d us, pread %d us in %d reads: %s\n", tid, $d / 1000, @io[tid] / 1000, @n[tid], @qtext[tid]);
	}
	delete(@start[tid]); delete(@io[tid]); delete(@n[tid]); delete(@qtext[tid]);
}
BEGIN { printf("ready\n"); }
`

var allConfigs = []config{hooksFloor, serveFSFloor, floor, dbiolatDefault, dbiolatDefaultRef, allFloor, dbiolatAll, bpftrace, strace, serveEvery, serveEmpty, serveFS, serveRef, serveDuty, serveDuty10, serveOTLP, serveOTLPAll}

func configNames() []string {
	var out []string
	for _, c := range allConfigs {
		out = append(out, c.name)
	}
	return out
}

func configByName(name string) (config, bool) {
	for _, c := range allConfigs {
		if c.name == name {
			return c, true
		}
	}
	return config{}, false
}

// env is what every measurement on one PostgreSQL version shares.
type env struct {
	dbiolat  string // the binary built for this run
	postgres string // the server binary, for bpftrace's USDT probes
	cluster  *pgsandbox.Cluster
	mysql    sysbenchServer // instead of cluster: MariaDB or MySQL, driven by sysbench
	tmp      string
	hasUSDT  bool      // the server's build has USDT probes
	otlp     *otlpSink // serve --otlp's collector
}

func setup() (*env, error) {
	tmp, err := os.MkdirTemp("", "dbiolat-overhead-")
	if err != nil {
		return nil, err
	}
	e := &env{dbiolat: filepath.Join(tmp, "dbiolat"), tmp: tmp}
	build := exec.Command("go", "build", "-o", e.dbiolat, "./cmd/dbiolat")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build
	if b, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("building dbiolat: %v\n%s", err, b)
	}
	if e.otlp, err = startOTLPSink(); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	return e, nil
}

func (e *env) cleanup() {
	e.otlp.Close()
	os.RemoveAll(e.tmp)
}

// sysbenchServer is a server of MySQL's protocol, driven by sysbench:
// Debian 12's MariaDB (mysandbox), or MySQL 9.7 from the sid root.
type sysbenchServer interface {
	PID() int
	Sysbench(ctx context.Context, o mysandbox.SysbenchOptions, phase string) (mysandbox.SysbenchResult, error)
}

// pid is the server's: the postmaster's, or mariadbd's or mysqld's.
func (e *env) pid() int {
	if e.mysql != nil {
		return e.mysql.PID()
	}
	return e.cluster.PostmasterPID()
}

// measure runs the workload once with cfg's tracer attached.
func measure(ctx context.Context, e *env, cfg config, workload, wflag string, clients, secs int, withStats bool) (measurement, error) {
	if e.postgres == "" {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", e.pid()))
		if err != nil {
			return measurement{}, err
		}
		e.postgres = exe
	}
	var m measurement
	var t *tracerProc
	if cfg.attach != nil {
		c, err := cfg.attach()
		if err != nil {
			return m, err
		}
		defer c.Close()
	}
	if cfg.command != nil {
		var err error
		if t, err = startTracer(cfg.command(e)); err != nil {
			return m, err
		}
		defer t.stop()
	}
	if withStats {
		stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
		if err != nil {
			return m, fmt.Errorf("enabling BPF statistics: %w", err)
		}
		defer stats.Close()
	}
	before, err := busyJiffies()
	if err != nil {
		return m, err
	}
	var toolBefore float64
	if t != nil {
		toolBefore = processCPU(t.cmd.Process.Pid)
	}
	tx, tps, err := e.load(ctx, workload, wflag, clients, secs)
	if err != nil {
		return m, err
	}
	after, err := busyJiffies()
	if err != nil {
		return m, err
	}
	if t != nil { // while the load ran: not the start-up's loading and verifying
		m.ToolCPU = processCPU(t.cmd.Process.Pid) - toolBefore
	}
	if cfg.exporter {
		time.Sleep(cfg.settle)
		if m.Latency, err = scrapeLatency(t.ready); err != nil {
			return m, err
		}
	}
	// USER_HZ is 100 on Linux: a jiffy is 10 ms.
	m.TPS, m.Tx, m.CPUus = tps, tx, (after-before)*10000/float64(tx)
	if t != nil {
		m.Programs, m.BPFns, m.BPFRuns = t.programStats()
		ru, err := t.stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.name, err) // its run still counts
		}
		m.ToolRSS = ru.Maxrss << 10
	}
	return m, nil
}

// tracerProc is a running tracer and the BPF programs that were there
// before it, so that its own can be told apart.
type tracerProc struct {
	cmd    *exec.Cmd
	ready  string // the line that said it was attached
	before map[ebpf.ProgramID]bool
	exited chan struct{} // closed once the tracer is reaped
	once   bool
}

func startTracer(args []string, ready string) (*tracerProc, error) {
	t := &tracerProc{before: programIDs(), exited: make(chan struct{})}
	t.cmd = exec.Command(args[0], args[1:]...)
	r, w := io.Pipe()
	t.cmd.Stdout, t.cmd.Stderr = w, w
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", args[0], err)
	}
	go func() {
		t.cmd.Wait()
		w.Close()
		close(t.exited)
	}()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), ready) {
			t.ready = sc.Text()
			go io.Copy(io.Discard, r) // keep the tracer's output flowing
			return t, nil
		}
	}
	t.stop()
	return nil, fmt.Errorf("%s did not attach", args[0])
}

// stop interrupts the tracer, as a user does, and returns its resource
// use; one that does not stop within 30s is killed, and says so.
func (t *tracerProc) stop() (*syscall.Rusage, error) {
	if !t.once {
		t.once = true
		t.cmd.Process.Signal(syscall.SIGINT)
	}
	var err error
	select {
	case <-t.exited:
	case <-time.After(30 * time.Second):
		t.cmd.Process.Kill()
		<-t.exited
		err = errors.New("the tracer did not stop within 30s of SIGINT: killed")
	}
	return t.cmd.ProcessState.SysUsage().(*syscall.Rusage), err
}

// processCPU is a process's CPU so far, in seconds: its threads' time on
// a CPU as the scheduler counts it, in nanoseconds (/proc/PID/task/*/
// schedstat; /proc/PID/stat counts 10 ms ticks, a few in a run: too
// coarse per transaction). A thread that exits within the run takes its
// share with it (the Go runtime's threads do not).
func processCPU(pid int) float64 {
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var ns float64
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var v float64
		fmt.Sscan(string(b), &v)
		ns += v
	}
	return ns / 1e9
}

// programStat is what the kernel counted of one program (or of the
// programs of one name: a USDT probe has one per site).
type programStat struct {
	Ns   uint64 `json:"run_ns"`
	Runs uint64 `json:"runs"`
}

// programStats sums the kernel's statistics of the BPF programs loaded
// since the tracer started, by name: those it holds, when it holds any
// (on a shared machine, other tracers load programs of the same names
// meanwhile, and their runs are not its cost).
func (t *tracerProc) programStats() (byName map[string]programStat, ns, runs uint64) {
	byName = map[string]programStat{}
	own := heldPrograms(t.cmd.Process.Pid)
	for id := range programIDs() {
		if t.before[id] || (own != nil && !own[id]) {
			continue
		}
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		info, ierr := p.Info()
		st, serr := p.Stats()
		p.Close()
		if ierr != nil || serr != nil {
			continue
		}
		ps := byName[info.Name]
		ps.Ns += uint64(st.Runtime)
		ps.Runs += st.RunCount
		byName[info.Name] = ps
		ns += uint64(st.Runtime)
		runs += st.RunCount
	}
	return byName, ns, runs
}

// heldPrograms are the BPF programs a process holds a descriptor of,
// itself or through a link (the prog_id of its descriptors' fdinfo); nil
// if none.
func heldPrograms(pid int) map[ebpf.ProgramID]bool {
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var held map[ebpf.ProgramID]bool
	for _, ent := range ents {
		b, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "prog_id:"); ok {
				if id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
					if held == nil {
						held = map[ebpf.ProgramID]bool{}
					}
					held[ebpf.ProgramID(id)] = true
				}
			}
		}
	}
	return held
}

func programIDs() map[ebpf.ProgramID]bool {
	ids := map[ebpf.ProgramID]bool{}
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			return ids
		}
		ids[next] = true
		id = next
	}
}

// busyJiffies is the machine's CPU time so far, without idle, iowait and
// steal (the host's share, which is noise here).
func busyJiffies() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0]) // cpu user nice system idle iowait irq softirq steal
	var sum float64
	for _, i := range []int{1, 2, 3, 6, 7} {
		var v float64
		fmt.Sscan(f[i], &v)
		sum += v
	}
	return sum, nil
}

// startMySQL starts the server a MySQL-family "version" runs on (mariadb:
// Debian 12's; mysql: MySQL 9.7 from the sid root, in a container as its
// users run it), with a 128 MB buffer pool and its sysbench tables loaded
// and warm; stop stops it.
func (e *env) startMySQL(ctx context.Context, version string, clients int) (stop func(), err error) {
	var name string
	switch version {
	case "mariadb":
		s, err := mysandbox.Start(mysandbox.Options{Settings: map[string]string{"innodb_buffer_pool_size": "128M"}})
		if err != nil {
			return nil, err
		}
		e.mysql, stop, name = s, func() { s.Stop() }, "MariaDB"
	case "mysql":
		root, err := sidroot.Root("mysql")
		if err != nil {
			return nil, err
		}
		port, err := sandbox.FreePort()
		if err != nil {
			return nil, err
		}
		m, err := sidroot.StartMySQL(ctx, root, sidroot.Container, port, nil, "--innodb-buffer-pool-size=128M")
		if err != nil {
			return nil, err
		}
		e.mysql, stop, name = m, m.Stop, "MySQL 9.7"
	}
	fmt.Fprintf(os.Stderr, "%s: loading sysbench, %d tables of %d rows\n", name, sysbenchTables, sysbenchRows)
	o := mysandbox.SysbenchOptions{Test: "oltp_read_only", Tables: sysbenchTables, TableSize: sysbenchRows, Threads: clients}
	if _, err = e.mysql.Sysbench(ctx, o, "prepare"); err == nil {
		o.Time = 5 // warm the buffer pool once, so round 1 is not special
		_, err = e.mysql.Sysbench(ctx, o, "run")
	}
	if err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// latency is what an exporter says of the run's query latencies.
type latency struct {
	Queries float64 `json:"queries"`
	MeanUs  float64 `json:"mean_us"`
	P50Us   float64 `json:"p50_us"`
	P90Us   float64 `json:"p90_us"`
	P99Us   float64 `json:"p99_us"`
}

// scrapeLatency reads the query histogram from the metrics an exporter
// serves (its ready line has the URL); quantiles interpolate within the
// log2 buckets, as Prometheus's histogram_quantile does.
func scrapeLatency(readyLine string) (*latency, error) {
	i := strings.Index(readyLine, "http://")
	if i < 0 {
		return nil, fmt.Errorf("no URL in %q", readyLine)
	}
	resp, err := http.Get(strings.Fields(readyLine[i:])[0])
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	f := fams["dbiolat_query_duration_seconds"]
	if f == nil || len(f.GetMetric()) == 0 {
		return nil, errors.New("no query histogram in the metrics")
	}
	h := f.GetMetric()[0].GetHistogram()
	n := float64(h.GetSampleCount())
	if n == 0 {
		return nil, errors.New("the exporter saw no query")
	}
	q := func(q float64) float64 {
		rank, lower, below := q*n, 0.0, 0.0
		for _, b := range h.GetBucket() {
			c := float64(b.GetCumulativeCount())
			if c >= rank {
				return 1e6 * (lower + (b.GetUpperBound()-lower)*(rank-below)/max(c-below, 1))
			}
			lower, below = b.GetUpperBound(), c
		}
		return 1e6 * lower
	}
	return &latency{Queries: n, MeanUs: 1e6 * h.GetSampleSum() / n, P50Us: q(0.5), P90Us: q(0.9), P99Us: q(0.99)}, nil
}
