// Command overhead measures what tracing costs a database: pgbench
// select-only and TPC-B-like on a throwaway PostgreSQL (sysbench's
// oltp_read_only and oltp_read_write on a MariaDB or MySQL), with no tracer and
// with each tracer configuration in turn, interleaved (the order rotates
// every round) so the machine's drift hits all alike. Per configuration it
// prints the median TPS ratio against the baseline of the same round with
// its interquartile range, machine CPU per transaction, the tracer's own
// CPU and peak memory, and the BPF run time per transaction from the
// kernel's statistics; for serve's duty cycles, their query latency
// quantiles against a fully traced run's. Not a test: the figures go into
// closing notes, and the table as JSON into bench/results/.
//
//	go run ./bench/overhead [-rounds 7] [-seconds 10] [-configs default,all,bpftrace,strace] [-versions 15,mariadb,mysql] [-rate TPS]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dbiolat/dbiolat/internal/loadgen"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/usdt"
)

// measurement is one run of the load (pgbench, or sysbench on MariaDB or MySQL).
type measurement struct {
	Workload string                 `json:"workload"`
	Version  string                 `json:"postgres_version"`
	Config   string                 `json:"config"`
	Round    int                    `json:"round"`
	TPS      float64                `json:"tps"`
	Tx       int64                  `json:"transactions"`
	CPUus    float64                `json:"cpu_us_per_tx"` // machine CPU (without steal) per transaction
	ToolCPU  float64                `json:"tool_cpu_s"`    // the tracer's own CPU (its threads' run time) while pgbench ran
	ToolRSS  int64                  `json:"tool_max_rss_bytes"`
	BPFns    uint64                 `json:"bpf_run_ns"` // the tracer's programs, all runs
	BPFRuns  uint64                 `json:"bpf_runs"`
	Programs map[string]programStat `json:"bpf_by_program,omitempty"`
	Latency  *latency               `json:"latency,omitempty"` // an exporter's, of this run's queries
}

// result is one configuration on one workload, over all rounds.
type result struct {
	Workload       string     `json:"workload"`
	Version        string     `json:"postgres_version"`
	Config         string     `json:"config"`
	Ratios         []float64  `json:"tps_ratios"` // traced / baseline of the same round
	MedianRatio    float64    `json:"median_tps_ratio"`
	IQR            [2]float64 `json:"tps_ratio_iqr"`
	MedianCPURatio float64    `json:"median_cpu_per_tx_ratio"`
	ToolCPU        float64    `json:"median_tool_cpu_s"`
	ToolNsPerTx    float64    `json:"median_tool_ns_per_tx"` // the tracer's process CPU per transaction
	ToolRSS        int64      `json:"max_tool_rss_bytes"`
	BPFnsPerTx     float64    `json:"median_bpf_ns_per_tx"`
	// OwnShare: the tracer's programs and process, CPU per transaction,
	// over the baseline's CPU per transaction; a floor of its cost (the
	// hooks' dispatch and the syscall slow path are not in it), measured
	// without the run-to-run noise of a TPS ratio.
	OwnShare float64 `json:"median_own_cpu_share"`
	// OverFloor: points of CPU per transaction over hooks-floor's, paired
	// by round ((this - floor) / baseline, the three of one round), when
	// the floor ran: the cost of the work beyond the empty hooks, with its
	// spread over the rounds.
	OverFloor   *spread  `json:"points_over_floor,omitempty"`
	TopPrograms []string `json:"top_programs"`
}

// spread is a median and its interquartile range.
type spread struct {
	Median float64    `json:"median"`
	IQR    [2]float64 `json:"iqr"`
}

// refBinary is -ref: the dbiolat the default-ref configuration runs.
var refBinary *string

func main() {
	rounds := flag.Int("rounds", 7, "rounds: in each, the baseline and every configuration run once")
	secs := flag.Int("seconds", 10, "seconds per pgbench run")
	clients := flag.Int("clients", 2, "pgbench clients (sysbench threads); with -capacity, synthetic backends loaded at once")
	scale := flag.Int("scale", 5, "pgbench scale (5: 75 MB)")
	sharedBuffers := flag.String("shared-buffers", "128MB", "PostgreSQL shared_buffers: 128MB holds scale 5, so queries read no files; 16MB makes every query pread from the page cache")
	syncCommit := flag.String("synchronous-commit", "on", "PostgreSQL synchronous_commit: off takes the WAL's flush at each commit (and the journal's noise with it) out of a TPC-B-like transaction's CPU, so a tracer's share of it can be told apart")
	queryIDs := flag.String("query-ids", "on", "PostgreSQL: on, the server computes query ids (pg_stat_statements loaded), which serve counts statements under; off (compute_query_id off, no pg_stat_statements): serve names statements by their text, hashed in the kernel")
	configs := flag.String("configs", "usdt-floor,default,all,bpftrace,strace", "configurations to measure: "+strings.Join(configNames(), ","))
	workloads := flag.String("workloads", "select-only,tpcb-like", "pgbench workloads: select-only, select-prepared (select-only's statement prepared once per connection, -M prepared: the fastest single statements, about 40,000 a second here), tpcb-like, pipeline (select-only's SELECT ten times in libpq's pipeline mode, one Sync: a transaction is ten statements), select-tls (select-only over TLS on a loopback TCP port)")
	rate := flag.Int("rate", 0, "pgbench -R (PostgreSQL): hold this many transactions a second, a steady load below saturation, for the latency agreement (a tracer's cost then shows in CPU, not TPS); 0: as fast as it goes")
	versions := flag.String("versions", "15", "servers, measured side by side in the same rounds: PostgreSQL major versions ("+strings.Join(pgsandbox.Versions, ",")+
		"), mariadb and mysql (MySQL 9.7 from the sid root; both sysbench: oltp_read_only for select-only, oltp_read_write for tpcb-like)")
	capacityRates := flag.String("capacity", "", "instead, the capacity ladder on a synthetic backend: query rates to hold for -seconds each with every query recorded, e.g. 25000,50000,100000,0 (0: unlimited)")
	counted := flag.Bool("counted", false, "with -capacity: serve's mode, every query counted in the kernel by statement identity (a record only of each identity's first)")
	refBinary = flag.String("ref", "", "config default-ref runs this dbiolat binary (one built from another commit: go build -o /tmp/dbiolat-ref ./cmd/dbiolat there) in the default mode")
	out := flag.String("o", "", "write the results as JSON here (default bench/results/overhead-TIME.json)")
	loadgen.ServeIfBackend() // the capacity ladder's backend is this program again
	flag.Parse()
	if *queryIDs != "on" && *queryIDs != "off" {
		fmt.Fprintf(os.Stderr, "overhead: -query-ids %q: on or off\n", *queryIDs)
		os.Exit(2)
	}
	o := options{rounds: *rounds, secs: *secs, clients: *clients, scale: *scale, rate: *rate, sharedBuffers: *sharedBuffers, syncCommit: *syncCommit, queryIDs: *queryIDs, out: *out}
	if *capacityRates != "" {
		rates, err := parseRates(*capacityRates)
		if err == nil {
			err = capacity(o, rates, *counted)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "overhead:", err)
			os.Exit(1)
		}
		return
	}
	for _, name := range strings.Split(*configs, ",") {
		c, ok := configByName(name)
		if !ok {
			fmt.Fprintf(os.Stderr, "overhead: unknown configuration %q (known: %s)\n", name, strings.Join(configNames(), ", "))
			os.Exit(2)
		}
		if (c.name == dbiolatDefaultRef.name || c.name == serveRef.name) && *refBinary == "" {
			fmt.Fprintf(os.Stderr, "overhead: %s needs -ref, the path of another dbiolat binary\n", c.name)
			os.Exit(2)
		}
		o.configs = append(o.configs, c)
	}
	o.workloads = strings.Split(*workloads, ",")
	o.versions = strings.Split(*versions, ",")
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "overhead:", err)
		os.Exit(1)
	}
}

type options struct {
	rounds, secs, clients, scale, rate  int
	sharedBuffers, syncCommit, queryIDs string
	out                                 string
	configs                             []config
	workloads, versions                 []string
}

var pgbenchFlag = map[string]string{"select-only": "-S", "select-prepared": "-S -M prepared", "tpcb-like": "", "select-tls": "-S"}

// pipelineScript is the pipeline workload's pgbench script: select-only's
// SELECT, ten times before one Sync.
func pipelineScript(scale int) string {
	return fmt.Sprintf("\\set aid random(1, %d)\n\\startpipeline\n", 100000*scale) +
		strings.Repeat("SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n", 10) + "\\endpipeline\n"
}

func run(o options) error {
	ctx := context.Background()
	if slices.Contains(o.workloads, "pipeline") {
		f, err := os.CreateTemp("", "overhead-pipeline-*.sql")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		_, err = f.WriteString(pipelineScript(o.scale))
		if err = errors.Join(err, f.Chmod(0o644), f.Close()); err != nil { // pgbench runs as the server's user
			return err
		}
		pgbenchFlag["pipeline"] = "-M extended -f " + f.Name()
	}
	base, err := setup()
	if err != nil {
		return err
	}
	defer base.cleanup()
	// One server per version, all running, measured in the same rounds:
	// the machine's drift touches them alike.
	envs := map[string]*env{}
	for _, v := range o.versions {
		e := *base
		if v == "mariadb" || v == "mysql" {
			stop, err := e.startMySQL(ctx, v, o.clients)
			if err != nil {
				return err
			}
			defer stop()
			envs[v] = &e
			continue
		}
		settings := map[string]string{"shared_buffers": o.sharedBuffers, "synchronous_commit": o.syncCommit}
		if o.queryIDs == "off" {
			settings["compute_query_id"], settings["shared_preload_libraries"] = "off", ""
		}
		tls := slices.ContainsFunc(o.workloads, func(w string) bool { return overTLS[w] })
		if tls {
			s, err := tlsSettings()
			if err != nil {
				return err
			}
			maps.Copy(settings, s)
		}
		c, err := pgsandbox.Start(ctx, pgsandbox.Options{Version: v, Settings: settings})
		if err != nil {
			return err
		}
		defer c.Stop()
		if tls {
			if err := c.EnableTLS(ctx); err != nil {
				return err
			}
		}
		e.cluster = c
		_, err = usdt.Open(filepath.Join(c.BinDir(), "postgres"))
		e.hasUSDT = err == nil
		envs[v] = &e
		fmt.Fprintf(os.Stderr, "PostgreSQL %s: loading pgbench scale %d\n", v, o.scale)
		if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", fmt.Sprint(o.scale)); err != nil {
			return err
		}
		// Warm the page cache and shared buffers once, so round 1 is not special.
		if _, err := c.Pgbench(ctx, "postgres", "-n", "-S", "-c", fmt.Sprint(o.clients), "-T", "5"); err != nil {
			return err
		}
	}
	type item struct {
		version string
		cfg     config
	}
	var all []item
	for _, v := range o.versions {
		for _, cfg := range append([]config{baseline}, o.configs...) {
			if !cfg.usdt || envs[v].hasUSDT {
				all = append(all, item{v, cfg})
			}
		}
	}
	var runs []measurement
	var results []result
	for _, wl := range o.workloads {
		wflag, ok := pgbenchFlag[wl]
		if !ok {
			return fmt.Errorf("unknown workload %q (select-only, select-prepared, tpcb-like, pipeline, select-tls)", wl)
		}
		if o.rate > 0 {
			wflag += fmt.Sprintf(" -R %d", o.rate)
		}
		type key struct{ version, config string }
		byItem := map[key][]measurement{}
		for r := 0; r < o.rounds; r++ {
			// Rotate the order every round, and reverse it every other:
			// each configuration sits before and after the others alike.
			order := append([]item(nil), all[r%len(all):]...)
			order = append(order, all[:r%len(all)]...)
			if r%2 == 1 {
				for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
					order[i], order[j] = order[j], order[i]
				}
			}
			for _, it := range order {
				if it.cfg.rounds > 0 && r >= it.cfg.rounds {
					continue
				}
				m, err := measure(ctx, envs[it.version], it.cfg, wl, wflag, o.clients, o.secs, false)
				if err != nil {
					return fmt.Errorf("%s, PostgreSQL %s, %s: %w", wl, it.version, it.cfg.name, err)
				}
				m.Workload, m.Version, m.Config, m.Round = wl, it.version, it.cfg.name, r+1
				fmt.Fprintf(os.Stderr, "%-11s round %d %-7s %-9s %8.0f tps %6.1f us CPU/tx  tool %5.2fs CPU %4d MB\n",
					wl, r+1, it.version, it.cfg.name, m.TPS, m.CPUus, m.ToolCPU, m.ToolRSS>>20)
				runs = append(runs, m)
				byItem[key{it.version, it.cfg.name}] = append(byItem[key{it.version, it.cfg.name}], m)
			}
		}
		for _, it := range all {
			if it.cfg.name == baseline.name {
				continue
			}
			// Where the kernel side's time goes, in one more run with the
			// kernel's BPF statistics on: they cost much on this kind of VM
			// (two clock reads per program run), so the rounds run without.
			p, err := measure(ctx, envs[it.version], it.cfg, wl, wflag, o.clients, o.secs, true)
			if err != nil {
				return fmt.Errorf("%s, PostgreSQL %s, %s with BPF statistics: %w", wl, it.version, it.cfg.name, err)
			}
			p.Workload, p.Version, p.Config = wl, it.version, it.cfg.name
			fmt.Fprintf(os.Stderr, "%-11s profile %-7s %-9s %8.0f tps, BPF %6.0f ns/tx\n", wl, it.version, it.cfg.name, p.TPS, float64(p.BPFns)/float64(p.Tx))
			runs = append(runs, p)
			r := summarize(wl, it.cfg.name, byItem[key{it.version, baseline.name}], byItem[key{it.version, hooksFloor.name}],
				byItem[key{it.version, it.cfg.name}], p)
			r.Version = it.version
			results = append(results, r)
		}
	}
	printTable(o, results)
	printAgreement(runs)
	return save(o, results, runs)
}

// summarize sets each run of a configuration against the baseline run of
// the same round, and against hooks-floor's (floor; none if it did not run).
func summarize(workload, config string, base, floor, traced []measurement, profile measurement) result {
	r := result{Workload: workload, Config: config}
	baseOf, floorOf := map[int]measurement{}, map[int]measurement{}
	for _, m := range base {
		baseOf[m.Round] = m
	}
	for _, m := range floor {
		floorOf[m.Round] = m
	}
	r.BPFnsPerTx = float64(profile.BPFns) / float64(max(profile.Tx, 1))
	var cpu, toolCPU, toolPerTx, own, over []float64
	for _, m := range traced {
		b := baseOf[m.Round]
		r.Ratios = append(r.Ratios, m.TPS/b.TPS)
		cpu = append(cpu, m.CPUus/b.CPUus)
		toolCPU = append(toolCPU, m.ToolCPU)
		toolPerTx = append(toolPerTx, m.ToolCPU*1e9/float64(max(m.Tx, 1)))
		own = append(own, (m.ToolCPU*1e9/float64(max(m.Tx, 1))+r.BPFnsPerTx)/(b.CPUus*1e3))
		r.ToolRSS = max(r.ToolRSS, m.ToolRSS)
		if f, ok := floorOf[m.Round]; ok {
			over = append(over, 100*(m.CPUus-f.CPUus)/b.CPUus)
		}
	}
	if len(over) > 0 && config != hooksFloor.name {
		r.OverFloor = &spread{quantile(over, 0.5), [2]float64{quantile(over, 0.25), quantile(over, 0.75)}}
	}
	r.MedianRatio = quantile(r.Ratios, 0.5)
	r.IQR = [2]float64{quantile(r.Ratios, 0.25), quantile(r.Ratios, 0.75)}
	r.MedianCPURatio = quantile(cpu, 0.5)
	r.ToolCPU = quantile(toolCPU, 0.5)
	r.ToolNsPerTx = quantile(toolPerTx, 0.5)
	r.OwnShare = quantile(own, 0.5)
	programs := profile.Programs
	names := make([]string, 0, len(programs))
	for p := range programs {
		names = append(names, p)
	}
	sort.Slice(names, func(i, j int) bool { return programs[names[i]].Ns > programs[names[j]].Ns })
	for i, p := range names {
		if i == 4 {
			break
		}
		ps := programs[p]
		r.TopPrograms = append(r.TopPrograms, fmt.Sprintf("%s %.0f%% (%.0f ns a run)", p,
			100*float64(ps.Ns)/float64(max(profile.BPFns, 1)), float64(ps.Ns)/float64(max(ps.Runs, 1))))
	}
	return r
}

func printTable(o options, results []result) {
	rate := "as fast as they go"
	if o.rate > 0 {
		rate = fmt.Sprintf("-R %d", o.rate)
	}
	fmt.Printf("\npgbench scale %d, shared_buffers %s, synchronous_commit %s, query ids %s, %d clients %s, %ds runs, %d rounds (strace: %d)\n",
		o.scale, o.sharedBuffers, o.syncCommit, o.queryIDs, o.clients, rate, o.secs, o.rounds, min(o.rounds, strace.rounds))
	fmt.Printf("%-11s %-4s %-9s %8s %7s %15s %9s %19s %8s %9s %10s %8s %10s  %s\n", "workload", "pg", "config", "TPS", "loss", "IQR", "CPU/tx", "over floor (IQR)", "own CPU", "tool CPU", "tool ns/tx", "tool RSS", "BPF ns/tx", "BPF time by program")
	for _, r := range results {
		over := ""
		if r.OverFloor != nil {
			over = fmt.Sprintf("%+.1f (%+.1f %+.1f)", r.OverFloor.Median, r.OverFloor.IQR[0], r.OverFloor.IQR[1])
		}
		fmt.Printf("%-11s %-4s %-9s %8.3f %6.1f%% %7.3f–%-7.3f %8.3fx %19s %7.2f%% %8.2fs %10.0f %6dMB %10.0f  %s\n", r.Workload, r.Version, r.Config, r.MedianRatio,
			(1-r.MedianRatio)*100, r.IQR[0], r.IQR[1], r.MedianCPURatio, over, 100*r.OwnShare, r.ToolCPU, r.ToolNsPerTx, r.ToolRSS>>20, r.BPFnsPerTx, strings.Join(r.TopPrograms, ", "))
	}
	fmt.Println(`TPS: median of traced/baseline per round; IQR: its interquartile range; CPU/tx: machine CPU per
transaction, traced/baseline; over floor: points of CPU per transaction over hooks-floor's, paired
by round, median and interquartile range (when hooks-floor ran); own CPU: the tracer's programs and process per transaction over the
baseline's CPU per transaction (a floor of its cost: the hooks' dispatch is not in it); tool ns/tx:
the tracer's process CPU per transaction; BPF: the
tracer's programs (kernel statistics, in a separate profile run)`)
}

func save(o options, results []result, runs []measurement) error {
	return saveJSON(o.out, "overhead", map[string]any{"seconds": o.secs, "clients": o.clients, "scale": o.scale, "rounds": o.rounds,
		"shared_buffers": o.sharedBuffers, "synchronous_commit": o.syncCommit, "query_ids": o.queryIDs, "versions": o.versions, "results": results, "runs": runs})
}

// saveJSON writes v to out, by default bench/results/NAME-TIME.json.
func saveJSON(out, name string, v any) error {
	if out == "" {
		if err := os.MkdirAll("bench/results", 0o755); err != nil {
			return err
		}
		out = filepath.Join("bench/results", name+"-"+time.Now().UTC().Format("20060102T150405Z")+".json")
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	if err := os.WriteFile(out, b, 0o600); err != nil {
		return err
	}
	fmt.Printf("results: %s\n", out)
	return nil
}

// heapBytes is the Go heap in use.
func heapBytes() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// quantile interpolates linearly between the sorted values.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

// printAgreement sets the duty-cycled exporter's query latencies beside
// those of the exporter traced all the time, on the same workload: the
// medians over rounds of each, and their ratio.
func printAgreement(runs []measurement) {
	type key struct{ workload, version, config string }
	by := map[key][]*latency{}
	tps := map[key][]float64{}
	for _, m := range runs {
		if m.Latency != nil && m.Round > 0 {
			k := key{m.Workload, m.Version, m.Config}
			by[k] = append(by[k], m.Latency)
			tps[k] = append(tps[k], m.TPS)
		}
	}
	median := func(ls []*latency, f func(*latency) float64) float64 {
		var v []float64
		for _, l := range ls {
			v = append(v, f(l))
		}
		return quantile(v, 0.5)
	}
	stats := []struct {
		name string
		f    func(*latency) float64
	}{{"mean", func(l *latency) float64 { return l.MeanUs }}, {"p50", func(l *latency) float64 { return l.P50Us }},
		{"p90", func(l *latency) float64 { return l.P90Us }}, {"p99", func(l *latency) float64 { return l.P99Us }}}
	for k, duty := range by {
		if !strings.HasPrefix(k.config, serveDuty.name) { // duty cycles only
			continue
		}
		full := by[key{k.workload, k.version, serveEvery.name}]
		if len(full) == 0 {
			continue
		}
		fmt.Printf("\nquery latency, %s on %s: %s (duty cycles) against serve (every query), medians of %d and %d runs\n", k.workload, k.version, k.config, len(duty), len(full))
		for _, s := range stats {
			d, f := median(duty, s.f), median(full, s.f)
			fmt.Printf("  %-4s %9.1f us %9.1f us  %6.3f\n", s.name, d, f, d/f)
		}
		fmt.Printf("  queries (the duty run's scaled estimate: of the load's traced cycles, one of which may end after it) %.0f and %.0f\n", median(duty, func(l *latency) float64 { return l.Queries }), median(full, func(l *latency) float64 { return l.Queries }))
		// A closed loop's mean latency is clients/TPS: how much slower
		// tracing everything made each transaction, in the same rounds.
		fullKey := key{k.workload, k.version, serveEvery.name}
		fmt.Printf("  pgbench's mean latency (clients/TPS), duty against full: %.3f (tracing everything slows what it measures)\n",
			quantile(tps[fullKey], 0.5)/quantile(tps[k], 0.5))
	}
}
