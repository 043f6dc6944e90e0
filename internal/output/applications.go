package output

import (
	"cmp"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"

	"github.com/dbiolat/dbiolat/internal/model"
)

// ApplicationStats sums the recorded queries of one application: who sent
// the time the fingerprints' table splits by statement.
type ApplicationStats struct {
	Application string // "" for the queries of no known application
	Calls       int
	TotalNs     uint64
	CPUNs       uint64
	IOWaitNs    uint64
}

// ByApplication groups queries by application, the most total time first
// (ties by name, so the order is stable).
func ByApplication(qs iter.Seq[model.Query]) []ApplicationStats {
	index := map[string]int{}
	var list []ApplicationStats
	for q := range qs {
		k, ok := index[q.Application]
		if !ok {
			k = len(list)
			index[q.Application] = k
			list = append(list, ApplicationStats{Application: q.Application})
		}
		a := &list[k]
		a.Calls += q.Statements
		a.TotalNs += q.QueryNs
		a.CPUNs += q.CPUNs
		a.IOWaitNs += q.IOWaitNs
	}
	slices.SortFunc(list, func(a, b ApplicationStats) int {
		return cmp.Or(cmp.Compare(b.TotalNs, a.TotalNs), strings.Compare(a.Application, b.Application))
	})
	return list
}

// ApplicationTable prints the applications with the most total time (at
// most top of them); nothing when no query named its application (a
// recording made before they did, or of clients that name none).
func ApplicationTable(w io.Writer, apps []ApplicationStats, top int) {
	if !slices.ContainsFunc(apps, func(a ApplicationStats) bool { return a.Application != "" }) {
		return
	}
	shown := apps[:max(0, min(top, len(apps)))]
	fmt.Fprintf(w, "\n%d applications; the %d with the most time:\n", len(apps), len(shown))
	fmt.Fprintf(w, "%7s %10s %10s %10s %10s %9s  %s\n", "calls", "total", "mean", "cpu", "io wait", "io share", "application")
	for _, a := range shown {
		name := a.Application
		if name == "" {
			name = "(none named)"
		}
		fmt.Fprintf(w, "%7d %10s %10s %10s %10s %8.0f%%  %s\n", a.Calls, dur(a.TotalNs), dur(a.TotalNs/uint64(max(a.Calls, 1))),
			dur(a.CPUNs), dur(a.IOWaitNs), 100*float64(a.IOWaitNs)/float64(max(a.TotalNs, 1)), name)
	}
}
