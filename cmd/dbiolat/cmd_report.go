package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/postgres"
	"github.com/dbiolat/dbiolat/internal/record"
)

func runReportCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	top := fs.Int("top", 10, "show the N query fingerprints with the most total time")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("give one recording file: dbiolat report FILE")
	}
	r, err := record.Open(pos[0])
	if err != nil {
		return err
	}
	return report(r, *top)
}

// report prints a recording's terminal summary: where it ran, the query
// fingerprints by total time with their I/O share, and the histograms.
func report(r *record.Recording, top int) error {
	w := stdout
	fmt.Fprintf(w, "recording of %s (PostgreSQL %s) on %s, kernel %s, %s CPUs\n", r.Meta["data_dir"], r.Meta["postgres_version"],
		r.Meta["device"], r.Meta["kernel"], r.Meta["cpus"])
	fmt.Fprintf(w, "file system %s at %s (%s)\n", r.Meta["fs_type"], r.Meta["mount_point"], r.Meta["mount_options"])
	if r.Summary == nil {
		fmt.Fprintf(w, "the recording was interrupted: it has no summary; what it holds is shown\n")
	}

	type agg struct {
		query                    string
		calls                    int
		total, cpu, fs, blk, iow uint64
	}
	byFP := map[string]*agg{}
	for i := range r.Queries {
		q := &r.Queries[i]
		a := byFP[q.Fingerprint]
		if a == nil {
			a = &agg{query: q.Query}
			byFP[q.Fingerprint] = a
		}
		a.calls++
		a.total += q.QueryNs
		a.cpu += q.CPUNs
		a.fs += q.FSNs()
		a.blk += q.BlkNs
		a.iow += q.IOWaitNs
	}
	list := make([]*agg, 0, len(byFP))
	for _, a := range byFP {
		list = append(list, a)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].total > list[j].total })
	if len(list) > top {
		list = list[:top]
	}
	fmt.Fprintf(w, "\n%d queries recorded, %d fingerprints; the %d with the most time:\n", len(r.Queries), len(byFP), len(list))
	fmt.Fprintf(w, "%7s %10s %10s %10s %10s %10s %9s  %s\n", "calls", "total", "mean", "cpu", "fs", "io wait", "io share", "query")
	for _, a := range list {
		fmt.Fprintf(w, "%7d %10s %10s %10s %10s %10s %8.0f%%  %.80s\n", a.calls, hist.FormatDuration(a.total),
			hist.FormatDuration(a.total/uint64(a.calls)), hist.FormatDuration(a.cpu), hist.FormatDuration(a.fs),
			hist.FormatDuration(a.iow), 100*float64(a.iow)/float64(max(a.total, 1)), a.query)
	}
	for i := range r.Processes { // background runs; connections are their queries
		if p := &r.Processes[i]; p.Role != string(postgres.ClientBackend) && p.Role != string(postgres.Postmaster) {
			fmt.Fprintln(w, output.ProcessLine(p))
		}
	}
	if r.Summary != nil {
		if err := output.Hists(w, r.Summary.Hists); err != nil {
			return err
		}
		output.Summary(w, r.Summary)
	}
	return nil
}
