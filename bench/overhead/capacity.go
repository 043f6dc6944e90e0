package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
)

// step is one load level of the capacity ladder.
type step struct {
	TargetQPS  int         `json:"target_qps"` // 0: as fast as pgbench goes
	QPS        float64     `json:"qps"`
	RunsPerSec float64     `json:"bpf_runs_per_sec"` // events handled in the kernel
	RecsPerSec float64     `json:"records_per_sec"`  // query records delivered to user space
	Lost       uint64      `json:"lost"`             // records or state the kernel could not keep
	Drops      model.Drops `json:"drops"`
	ToolRSS    int64       `json:"tool_max_rss_bytes"`
	ToolCPU    float64     `json:"tool_cpu_s"`
}

// capacity raises the query rate step by step with dbiolat recording every
// query (the heaviest mode: each query a ring-buffer record, plus the
// waterfall's and the file system's events) and finds the highest rate
// held for the whole step with nothing lost.
func capacity(o options, rates []int) error {
	ctx := context.Background()
	e, err := setup()
	if err != nil {
		return err
	}
	defer e.cleanup()
	// 16MB shared buffers: every query also reads pages from the page
	// cache, so file system events come with the queries.
	c, err := pgsandbox.Start(ctx, pgsandbox.Options{Settings: map[string]string{"shared_buffers": "16MB", "max_connections": "50"}})
	if err != nil {
		return err
	}
	defer c.Stop()
	e.cluster = c
	fmt.Fprintf(os.Stderr, "loading pgbench scale %d\n", o.scale)
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", fmt.Sprint(o.scale)); err != nil {
		return err
	}
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME) // to count the events; cost is not measured here
	if err != nil {
		return fmt.Errorf("enabling BPF statistics: %w", err)
	}
	defer stats.Close()

	var steps []step
	best := step{}
	for _, rate := range rates {
		t, err := startTracer(dbiolatAll.command(e))
		if err != nil {
			return err
		}
		args := []string{"-n", "-S", "-c", "4", "-j", "2", "-T", fmt.Sprint(o.secs)}
		if rate > 0 {
			args = append(args, "-R", fmt.Sprint(rate))
		}
		out, err := c.Pgbench(ctx, "postgres", args...)
		_, _, runs := t.programStats()
		ru, serr := t.stop()
		if err != nil || serr != nil {
			return fmt.Errorf("at %d qps: %v %v", rate, err, serr)
		}
		res, err := pgsandbox.ParsePgbench(out)
		if err != nil {
			return err
		}
		var sum model.Summary
		if err := json.Unmarshal([]byte(t.lastLine()), &sum); err != nil || sum.Type != "summary" {
			return fmt.Errorf("at %d qps: dbiolat's last line is not its summary: %q", rate, t.lastLine())
		}
		s := step{TargetQPS: rate, QPS: res.TPS, RunsPerSec: float64(runs) / float64(o.secs),
			RecsPerSec: float64(sum.Reported) / sum.Seconds, Lost: sum.Drops.Lost(), Drops: sum.Drops,
			ToolRSS: ru.Maxrss << 10, ToolCPU: float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9}
		steps = append(steps, s)
		fmt.Fprintf(os.Stderr, "target %6d qps: %7.0f qps, %8.0f BPF runs/s, %7.0f records/s, lost %d, dbiolat %.1fs CPU %d MB\n",
			rate, s.QPS, s.RunsPerSec, s.RecsPerSec, s.Lost, s.ToolCPU, s.ToolRSS>>20)
		if s.Lost == 0 && s.RunsPerSec > best.RunsPerSec {
			best = s
		}
	}
	fmt.Printf("\ncapacity: %.0f BPF runs/s (%.0f query records/s, %.0f qps) held for %ds with nothing lost; peak dbiolat memory %d MB\n",
		best.RunsPerSec, best.RecsPerSec, best.QPS, o.secs, maxRSS(steps)>>20)
	return saveJSON(o.out, "capacity", map[string]any{"seconds": o.secs, "steps": steps, "best": best})
}

func maxRSS(steps []step) int64 {
	var m int64
	for _, s := range steps {
		m = max(m, s.ToolRSS)
	}
	return m
}

func parseRates(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 0 {
			return nil, fmt.Errorf("bad rate %q in -capacity (queries per second, 0: unlimited)", f)
		}
		out = append(out, n)
	}
	return out, nil
}
