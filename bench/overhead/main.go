// Command overhead measures what dbiolat costs a database: pgbench
// select-only and TPC-B-like on a throwaway PostgreSQL, runs without and
// with dbiolat attached, interleaved (ABBA) so the machine's drift hits both
// alike, and prints the median TPS ratio per workload. Not a test: the
// numbers go into the closing notes and bench/results/.
//
//	go run ./bench/overhead [-pairs 7] [-seconds 10] [-mode "slowlog"] [-shared-buffers 16MB -scale 8]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dbiolat/dbiolat/internal/pgsandbox"
)

type run struct {
	Workload string  `json:"workload"`
	Traced   bool    `json:"traced"`
	Pair     int     `json:"pair"`
	TPS      float64 `json:"tps"`
	CPUus    float64 `json:"cpu_us_per_tx"` // machine CPU (without steal) per transaction
}

type result struct {
	Workload    string    `json:"workload"`
	Baseline    []float64 `json:"baseline_tps"`
	Traced      []float64 `json:"traced_tps"`
	Ratios      []float64 `json:"ratios"` // traced / baseline, per pair
	MedianRatio float64   `json:"median_ratio"`
	MedianLoss  float64   `json:"median_loss_pct"`
	// CPU per transaction is steadier than TPS on a shared VM: the host's
	// steal time is left out. Ratio > 1: the tracer costs CPU.
	CPURatios      []float64 `json:"cpu_ratios"`
	MedianCPURatio float64   `json:"median_cpu_ratio"`
}

func main() {
	pairs := flag.Int("pairs", 7, "baseline/traced pairs per workload")
	secs := flag.Int("seconds", 10, "seconds per pgbench run")
	clients := flag.Int("clients", 2, "pgbench clients")
	scale := flag.Int("scale", 5, "pgbench scale (5: 75 MB)")
	sharedBuffers := flag.String("shared-buffers", "128MB", "PostgreSQL shared_buffers: 128MB holds scale 5, so queries read no files; 16MB makes every query pread from the page cache")
	mode := flag.String("mode", "slowlog", "dbiolat command line to attach (its --pid is added)")
	out := flag.String("o", "", "write the results as JSON here (default bench/results/overhead-TIME.json)")
	flag.Parse()
	if err := run1(*pairs, *secs, *clients, *scale, *sharedBuffers, *mode, *out); err != nil {
		fmt.Fprintln(os.Stderr, "overhead:", err)
		os.Exit(1)
	}
}

func run1(pairs, secs, clients, scale int, sharedBuffers, mode, out string) error {
	ctx := context.Background()
	bin := filepath.Join(os.TempDir(), fmt.Sprintf("dbiolat-bench-%d", os.Getpid()))
	if b, err := exec.Command("go", "build", "-o", bin, "./cmd/dbiolat").CombinedOutput(); err != nil {
		return fmt.Errorf("building dbiolat: %v\n%s", err, b)
	}
	defer os.Remove(bin)

	c, err := pgsandbox.Start(ctx, pgsandbox.Options{Settings: map[string]string{"shared_buffers": sharedBuffers}})
	if err != nil {
		return err
	}
	defer c.Stop()
	fmt.Fprintf(os.Stderr, "loading pgbench scale %d\n", scale)
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", fmt.Sprint(scale)); err != nil {
		return err
	}
	// Warm the page cache and shared buffers once, so run 1 is not special.
	if _, err := c.Pgbench(ctx, "postgres", "-n", "-S", "-c", fmt.Sprint(clients), "-T", "5"); err != nil {
		return err
	}

	workloads := []struct{ name, flag string }{{"select-only", "-S"}, {"tpcb-like", ""}}
	var results []result
	var runs []run
	for _, w := range workloads {
		r := result{Workload: w.name}
		for p := 0; p < pairs; p++ {
			// ABBA: even pairs start untraced, odd pairs start traced.
			order := []bool{false, true}
			if p%2 == 1 {
				order = []bool{true, false}
			}
			cpu := map[bool]float64{}
			for _, traced := range order {
				m, err := pgbench(ctx, c, bin, mode, w.flag, clients, secs, traced)
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "%-11s pair %d %-8s %8.0f tps %6.1f us CPU/tx\n", w.name, p+1, map[bool]string{false: "baseline", true: "traced"}[traced], m.TPS, m.CPUus)
				runs = append(runs, m.run(w.name, traced, p+1))
				cpu[traced] = m.CPUus
				if traced {
					r.Traced = append(r.Traced, m.TPS)
				} else {
					r.Baseline = append(r.Baseline, m.TPS)
				}
			}
			r.Ratios = append(r.Ratios, r.Traced[p]/r.Baseline[p])
			r.CPURatios = append(r.CPURatios, cpu[true]/cpu[false])
		}
		r.MedianRatio = median(r.Ratios)
		r.MedianCPURatio = median(r.CPURatios)
		r.MedianLoss = (1 - r.MedianRatio) * 100
		results = append(results, r)
	}

	fmt.Printf("\ndbiolat %s: pgbench scale %d, shared_buffers %s, %d clients, %ds runs, %d interleaved pairs\n", mode, scale, sharedBuffers, clients, secs, pairs)
	fmt.Printf("%-12s %12s %13s %12s %8s %16s\n", "workload", "median base", "median traced", "TPS ratio", "loss", "CPU/tx ratio")
	for _, r := range results {
		fmt.Printf("%-12s %12.0f %13.0f %12.3f %7.1f%% %16.3f\n", r.Workload, median(r.Baseline), median(r.Traced), r.MedianRatio, r.MedianLoss, r.MedianCPURatio)
	}
	if out == "" {
		if err := os.MkdirAll("bench/results", 0o755); err != nil {
			return err
		}
		out = filepath.Join("bench/results", "overhead-"+time.Now().UTC().Format("20060102T150405Z")+".json")
	}
	b, _ := json.MarshalIndent(map[string]any{"mode": mode, "seconds": secs, "clients": clients, "scale": scale,
		"shared_buffers": sharedBuffers, "results": results, "runs": runs}, "", "  ")
	if err := os.WriteFile(out, b, 0o600); err != nil {
		return err
	}
	fmt.Printf("results: %s\n", out)
	return nil
}

type measurement struct{ TPS, CPUus float64 }

func (m measurement) run(workload string, traced bool, pair int) run {
	return run{Workload: workload, Traced: traced, Pair: pair, TPS: m.TPS, CPUus: m.CPUus}
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

// pgbench runs one measurement, with dbiolat attached when traced.
func pgbench(ctx context.Context, c *pgsandbox.Cluster, bin, mode, wflag string, clients, secs int, traced bool) (measurement, error) {
	if traced {
		args := append(strings.Fields(mode), "--pid", fmt.Sprint(c.PostmasterPID()))
		cmd := exec.Command(bin, args...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return measurement{}, err
		}
		if err := cmd.Start(); err != nil {
			return measurement{}, err
		}
		sc := bufio.NewScanner(stderr)
		attached := false
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "Tracing ") {
				attached = true
				break
			}
		}
		if !attached {
			cmd.Wait()
			return measurement{}, fmt.Errorf("dbiolat %s did not attach", mode)
		}
		go func() {
			for sc.Scan() {
			}
		}()
		defer func() {
			cmd.Process.Signal(syscall.SIGINT)
			cmd.Wait()
		}()
	}
	args := []string{"-n", "-c", fmt.Sprint(clients), "-T", fmt.Sprint(secs)}
	if wflag != "" {
		args = append(args, wflag)
	}
	before, err := busyJiffies()
	if err != nil {
		return measurement{}, err
	}
	out, err := c.Pgbench(ctx, "postgres", args...)
	if err != nil {
		return measurement{}, err
	}
	after, err := busyJiffies()
	if err != nil {
		return measurement{}, err
	}
	res, err := pgsandbox.ParsePgbench(out)
	if err != nil || res.Transactions == 0 {
		return measurement{}, fmt.Errorf("pgbench: %v", err)
	}
	// USER_HZ is 100 on Linux: a jiffy is 10 ms.
	return measurement{TPS: res.TPS, CPUus: (after - before) * 10000 / float64(res.Transactions)}, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
