// Command dbiolat tells, for every PostgreSQL, MySQL or MariaDB query,
// where its time went: CPU, run queue, locks, file system, block device.
// See README.md.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// stdout is buffered: a busy database can produce thousands of lines a
// second; the trace loop flushes after every drain, main before exiting.
var stdout = bufio.NewWriter(os.Stdout)

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string) error
}

var commands = []command{
	{"slowlog", "one line per query with its file system, block and CPU time", runSlowlogCmd},
	{"hist", "log2 latency histograms per layer: query, fs read/write/sync, block", runHistCmd},
	{"explain", "the waterfall of the slowest queries, as trees: CPU, run queue, I/O, locks", runExplainCmd},
	{"iops", "I/O per second by process role and device, per interval", runIOPSCmd},
	{"top", "a live view: the busiest query fingerprints and backends, where their time went, I/O by role", runTopCmd},
	{"serve", "a Prometheus exporter: I/O by role and layer, histograms, drops, on /metrics", runServeCmd},
	{"record", "write everything a trace sees into one file (SQLite), for report and compare", runRecordCmd},
	{"report", "summarize a recording: queries by fingerprint, I/O share, histograms", runReportCmd},
	{"compare", "two recordings side by side, per layer, and the layer where they differ", runCompareCmd},
	{"bench", "measure a storage: fio's reference and a traced PostgreSQL workload, into one recording", runBenchCmd},
	{"doctor", "check privileges, kernel features and the database servers (PostgreSQL, MySQL, MariaDB)", runDoctorCmd},
	{"demo", "start a throwaway PostgreSQL, run a workload, trace it and show the result", runDemoCmd},
}

func usage() {
	fmt.Fprintf(os.Stderr, "dbiolat: where each database query's time went (CPU, run queue, locks, file system, block device), for PostgreSQL, MySQL and MariaDB, with eBPF\n\nusage: dbiolat COMMAND [options]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(os.Stderr, "\n'dbiolat COMMAND -h' lists a command's options.\n")
}

// heapLimit is where the garbage collector starts working harder: it
// keeps the process within its memory budget (README: 150 MB, with the
// ring buffer's mapping and the binary) under a flood of records.
const heapLimit = 96 << 20

func main() {
	debug.SetMemoryLimit(heapLimit)
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	for _, c := range commands {
		if c.name != os.Args[1] {
			continue
		}
		// Ctrl-C and SIGTERM end the trace; the command prints its summary.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		// A closed pipe ("dbiolat slowlog | head") must not kill us before
		// the probes detach and a demo's PostgreSQL stops: make it an error.
		signal.Ignore(syscall.SIGPIPE)
		err := c.run(ctx, os.Args[2:])
		stop()
		if ferr := stdout.Flush(); err == nil {
			err = ferr
		}
		if errors.Is(err, errHelp) || errors.Is(err, syscall.EPIPE) {
			return
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "dbiolat %s: %v\n", c.name, err)
			os.Exit(1)
		}
		return
	}
	fmt.Fprintf(os.Stderr, "dbiolat: unknown command %q: run dbiolat -h for the list\n", os.Args[1])
	os.Exit(2)
}
