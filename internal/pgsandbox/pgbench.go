package pgsandbox

import (
	"fmt"
	"strconv"
	"strings"
)

// PgbenchResult is the summary of a pgbench run, used by benchmarks to
// compare throughput with and without the profiler attached.
type PgbenchResult struct {
	TPS          float64 // excluding initial connection time
	Transactions int64   // actually processed
	Failed       int64   // 0 when pgbench (< 15) does not report it
	LatencyAvgMs float64
}

// ParsePgbench parses pgbench's report (stdout), e.g.
//
//	number of transactions actually processed: 1000/1000
//	number of failed transactions: 0 (0.000%)
//	latency average = 1.6 ms
//	tps = 1234.5 (without initial connection time)
//
// The processed count has no "/total" with -T. It fails if the
// transactions or tps line is missing.
func ParsePgbench(out string) (PgbenchResult, error) {
	var r PgbenchResult
	var haveTx, haveTPS bool
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		var err error
		switch {
		case strings.HasPrefix(line, "number of transactions actually processed:"):
			v := strings.TrimSpace(strings.TrimPrefix(line, "number of transactions actually processed:"))
			v, _, _ = strings.Cut(v, "/")
			r.Transactions, err = strconv.ParseInt(v, 10, 64)
			haveTx = true
		case strings.HasPrefix(line, "number of failed transactions:"):
			v := strings.Fields(strings.TrimPrefix(line, "number of failed transactions:"))
			if len(v) > 0 {
				r.Failed, err = strconv.ParseInt(v[0], 10, 64)
			}
		case strings.HasPrefix(line, "latency average ="):
			v := strings.Fields(strings.TrimPrefix(line, "latency average ="))
			if len(v) > 0 {
				r.LatencyAvgMs, err = strconv.ParseFloat(v[0], 64)
			}
		case strings.HasPrefix(line, "tps ="):
			// pgbench < 14 prints two tps lines; prefer the one that
			// excludes connection time, as pgbench >= 14 does.
			if haveTPS && !strings.Contains(line, "without") && !strings.Contains(line, "excluding") {
				continue
			}
			v := strings.Fields(strings.TrimPrefix(line, "tps ="))
			if len(v) > 0 {
				r.TPS, err = strconv.ParseFloat(v[0], 64)
				haveTPS = true
			}
		}
		if err != nil {
			return r, fmt.Errorf("pgsandbox: parsing pgbench line %q: %w", line, err)
		}
	}
	if !haveTx || !haveTPS {
		return r, fmt.Errorf("pgsandbox: pgbench output has no transaction count or tps line:\n%s", out)
	}
	return r, nil
}
