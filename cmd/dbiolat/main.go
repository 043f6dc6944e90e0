// Command dbiolat tells, for every PostgreSQL, MySQL or MariaDB query,
// where its time went: CPU, run queue, locks, file system, block device.
// See README.md.
//
// The command line is spf13/cobra's, with spf13/pflag's GNU-style flags:
// what kubectl, cilium and Inspektor Gadget use, so dbiolat reads like the
// tools beside it. Cobra brings "help COMMAND" and completion for bash,
// zsh and fish whose scripts ask the binary itself (dbiolat __complete)
// for commands and flags, so they cannot go stale; pflag alone would need
// three hand-written scripts kept in step with every flag.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// stdout is buffered: a busy database can produce thousands of lines a
// second; the trace loop flushes after every drain, main before exiting.
var stdout = bufio.NewWriter(os.Stdout)

// A command defines its flags in run, before parseArgs, and does nothing
// else before: asked for --help, run returns them (see flagsOf).
type command struct {
	name, summary string
	args          string // the positional arguments, as usage shows them: recording files unless bracketed ("[interval [count]]")
	run           func(ctx context.Context, args []string) error
}

var commands = []command{
	{"slowlog", "one line per query with its file system, block and CPU time", "", runSlowlogCmd},
	{"hist", "log2 latency histograms per layer: query, fs read/write/sync, block", "[interval [count]]", runHistCmd},
	{"explain", "the waterfall of the slowest queries, as trees: CPU, run queue, I/O, locks", "", runExplainCmd},
	{"iops", "I/O per second by process role and device, per interval", "[interval [count]]", runIOPSCmd},
	{"top", "a live view: the busiest query fingerprints and backends, where their time went, I/O by role", "", runTopCmd},
	{"serve", "a Prometheus exporter: I/O by role and layer, histograms, drops, on /metrics", "", runServeCmd},
	{"record", "write everything a trace sees into one file (SQLite), for report and compare", "", runRecordCmd},
	{"report", "summarize a recording: queries by fingerprint, I/O share, histograms", "FILE", runReportCmd},
	{"compare", "two recordings side by side, per layer, and the layer where they differ", "A B", runCompareCmd},
	{"bench", "measure a storage: fio's reference and a traced database workload (PostgreSQL or MariaDB), into one recording", "", runBenchCmd},
	{"doctor", "check privileges, kernel features and the database servers (PostgreSQL, MySQL, MariaDB)", "", runDoctorCmd},
	{"demo", "start a throwaway PostgreSQL or MariaDB, run a workload, trace it and show the result", "", runDemoCmd},
	{"version", "dbiolat's version, the Go it was built with and the kernel it runs on", "", runVersionCmd},
}

const tagline = "dbiolat: where each database query's time went (CPU, run queue, locks, file system, block device), for PostgreSQL, MySQL and MariaDB, with eBPF"

// flagsOf is a command's flag set, as its run defines it.
func flagsOf(c command) *pflag.FlagSet {
	var h *helpRequest
	if err := c.run(context.Background(), []string{"--help"}); !errors.As(err, &h) {
		panic(fmt.Sprintf("dbiolat %s --help returned %v, not its flags", c.name, err))
	}
	return h.flags
}

// newRootCommand is the command tree: each command parses its own flags
// (DisableFlagParsing), cobra knows them for help and completion.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:               "dbiolat",
		Short:             tagline,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		// One sentence on a mistyped command, not a list of guesses.
		DisableSuggestions: true,
		// Without a command: the list, on stderr, and a failure (scripts
		// calling dbiolat with a missing argument must notice).
		RunE: func(cmd *cobra.Command, args []string) error {
			printRootHelp(cmd, os.Stderr)
			return errUsage
		},
	}
	root.SetOut(stdout)
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		if cmd == root {
			printRootHelp(cmd, cmd.OutOrStdout())
			return
		}
		printCommandHelp(cmd)
	})
	for _, c := range commands {
		cmd := &cobra.Command{
			Use:                c.name + " [options]" + strings.TrimRight(" "+c.args, " "),
			Short:              c.summary,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				err := c.run(cmd.Context(), args)
				if errors.As(err, new(*helpRequest)) {
					printCommandHelp(cmd)
					return nil
				}
				return err
			},
			ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return completeArgs(cmd.Flags(), c.args != "" && !strings.HasPrefix(c.args, "["), args, toComplete)
			},
		}
		cmd.Flags().AddFlagSet(flagsOf(c))
		root.AddCommand(cmd)
	}
	root.AddCommand(newCompletionCommand())
	// "help COMMAND" is --help; an unknown topic is an unknown command.
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [COMMAND]",
		Short: "the list of commands, or a command's options",
		RunE: func(_ *cobra.Command, args []string) error {
			c, _, err := root.Find(args)
			if err != nil || (c == root && len(args) > 0) {
				return fmt.Errorf("unknown command %q", strings.Join(args, " "))
			}
			return c.Help()
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var names []cobra.Completion
			for _, c := range root.Commands() {
				if c.IsAvailableCommand() && len(args) == 0 {
					names = append(names, cobra.CompletionWithDesc(c.Name(), c.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
	})
	return root
}

// printRootHelp lists the commands, in the order a user meets them.
func printRootHelp(root *cobra.Command, w io.Writer) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  dbiolat COMMAND [options]\n\nCommands:\n", tagline)
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() {
			fmt.Fprintf(w, "  %-10s %s\n", c.Name(), c.Short)
		}
	}
	fmt.Fprintf(w, "\nRun 'dbiolat help COMMAND' or 'dbiolat COMMAND --help' for a command's options.\n")
}

// helpWidth is where the descriptions of options wrap.
const helpWidth = 100

// printCommandHelp shows what a command does, its usage and its options,
// grouped under the headings their definitions give them.
func printCommandHelp(cmd *cobra.Command) {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%s\n\nUsage:\n  dbiolat %s\n", cmd.Short, cmd.Use)
	if cmd.Long != "" {
		fmt.Fprintf(w, "\n%s\n", cmd.Long)
	}
	var headings []string
	groups := map[string]*pflag.FlagSet{}
	cmd.Flags().SortFlags = false
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return // cobra's; listed last
		}
		h := "Options"
		if g := f.Annotations[groupAnnotation]; len(g) > 0 {
			h = g[0]
		}
		if groups[h] == nil {
			// The command's own options first, then the shared groups.
			if h == "Options" {
				headings = append([]string{h}, headings...)
			} else {
				headings = append(headings, h)
			}
			groups[h] = pflag.NewFlagSet(h, pflag.ContinueOnError)
			groups[h].SortFlags = false
		}
		groups[h].AddFlag(f)
	})
	for _, h := range headings {
		fmt.Fprintf(w, "\n%s:\n%s", h, groups[h].FlagUsagesWrapped(helpWidth))
	}
	fmt.Fprintf(w, "\n  -h, --help   show this help\n")
}

// completeArgs completes what cobra leaves to a command that parses its
// own flags: a flag's value (files or directories where the definition
// marks it with cobra.MarkFlagFilename or MarkFlagDirname, the values
// its choices list, else nothing to offer), and positional arguments: files when the command takes them
// (recordings), else nothing. Flag names cobra completes itself.
func completeArgs(fs *pflag.FlagSet, takesFiles bool, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if strings.HasPrefix(toComplete, "-") {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if n := len(args); n > 0 && strings.HasPrefix(args[n-1], "-") && !strings.Contains(args[n-1], "=") {
		name := strings.TrimLeft(args[n-1], "-")
		f := fs.Lookup(name)
		if f == nil && len(name) == 1 {
			f = fs.ShorthandLookup(name)
		}
		if f != nil && f.NoOptDefVal == "" { // a flag that takes a value: this is it
			if _, ok := f.Annotations[cobra.BashCompSubdirsInDir]; ok {
				return nil, cobra.ShellCompDirectiveFilterDirs
			}
			if _, ok := f.Annotations[cobra.BashCompFilenameExt]; ok {
				return nil, cobra.ShellCompDirectiveDefault
			}
			if c, ok := f.Annotations[choicesAnnotation]; ok {
				return c, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
	}
	if takesFiles {
		return nil, cobra.ShellCompDirectiveDefault
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// errUsage ends dbiolat run without a command or with an unknown one:
// exit status 2, as for a usage error in most tools.
var errUsage = errors.New("usage")

// heapLimit is where the garbage collector starts working harder: it
// keeps the process within its memory budget (README: 150 MB, with the
// ring buffer's mapping and the binary) under a flood of records.
const heapLimit = 96 << 20

func main() {
	debug.SetMemoryLimit(heapLimit)
	cobra.EnableCommandSorting = false // the order of the commands list
	// Ctrl-C and SIGTERM end the trace; the command prints its summary.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A closed pipe ("dbiolat slowlog | head") must not kill us before
	// the probes detach and a demo's PostgreSQL stops: make it an error.
	signal.Ignore(syscall.SIGPIPE)
	cmd, err := newRootCommand().ExecuteContextC(ctx)
	stop()
	if ferr := stdout.Flush(); err == nil {
		err = ferr
	}
	switch {
	case err == nil || errors.Is(err, syscall.EPIPE):
	case errors.Is(err, errUsage):
		os.Exit(2)
	case strings.HasPrefix(err.Error(), "unknown command"):
		// cobra's own sentence, `unknown command "frob" for "dbiolat"`, shortened
		fmt.Fprintf(os.Stderr, "dbiolat: %s: run dbiolat --help for the list\n", strings.TrimSuffix(err.Error(), ` for "dbiolat"`))
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", cmd.CommandPath(), err)
		os.Exit(1)
	}
}
