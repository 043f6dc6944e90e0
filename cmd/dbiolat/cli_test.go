package main

import (
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// helpOf runs the binary with args and returns what it printed on stdout,
// failing the test unless it exited 0 with nothing on stderr.
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("dbiolat %s: %v, stderr %q", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// Every command answers --help, -h and "dbiolat help COMMAND" alike: its
// one-line description, its usage, and every flag it parses, spelt GNU
// style (--name, -o for the one-letter ones).
func TestEveryCommandHasHelp(t *testing.T) {
	root := helpOf(t, "--help")
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			help := helpOf(t, c.name, "--help")
			if !strings.HasPrefix(help, c.summary+"\n\nUsage:\n  dbiolat "+c.name+" [options]") {
				t.Errorf("help does not open with the description and usage:\n%s", help)
			}
			for _, other := range [][]string{{c.name, "-h"}, {"help", c.name}} {
				if h := helpOf(t, other...); h != help {
					t.Errorf("dbiolat %s differs from --help:\n%s", strings.Join(other, " "), h)
				}
			}
			if !strings.Contains(root, "\n  "+c.name+" ") || !strings.Contains(root, c.summary) {
				t.Errorf("dbiolat --help does not list %s with its description", c.name)
			}
			flagsOf(c).VisitAll(func(f *pflag.Flag) {
				want := "      --" + f.Name + " "
				if f.Shorthand != "" {
					want = "  -" + f.Shorthand + ", --" + f.Name + " "
				}
				if !strings.Contains(help, want) {
					t.Errorf("help does not list %q:\n%s", want, help)
				}
			})
			// Go's flag package wrote "-fs": no option is shown that way.
			if m := regexp.MustCompile(`(?m)^\s+-[a-z][a-z-]+\b`).FindString(help); m != "" {
				t.Errorf("help shows a single-dash long option %q", m)
			}
		})
	}
}

// Defaults are shown as a user would type them: "1s", "off" for a
// threshold that is not set, never Go's "-1ns" or "0s".
func TestHelpShowsDefaultsAsTyped(t *testing.T) {
	var all strings.Builder
	for _, c := range commands {
		all.WriteString(helpOf(t, c.name, "--help"))
	}
	for _, bad := range []string{"ns)", "(default -", "(default 0s)", "(default 0)", `(default "")`, "(default false)"} {
		if strings.Contains(all.String(), bad) {
			t.Errorf("a help text shows %q", bad)
		}
	}
	for _, tc := range []struct{ cmd, flag, def string }{
		{"slowlog", "--min-query duration", "(default off)"},
		{"slowlog", "--min-io duration", "(default off)"},
		{"explain", "--min-query duration", "(default 1ms)"},
		{"top", "--interval duration", "(default 1s)"},
		{"serve", "--window duration", "(default 10s)"},
		{"serve", "--otlp-threshold duration", "(default 50ms)"},
		{"serve", "--otlp-sample float", "(default 0.01)"},
		{"slowlog", "--otlp-rate float", "(default 100)"},
	} {
		help := helpOf(t, tc.cmd, "--help")
		i := strings.Index(help, tc.flag)
		if i < 0 {
			t.Errorf("%s --help has no %q", tc.cmd, tc.flag)
			continue
		}
		// The flag's entry runs to the next flag or heading.
		entry := help[i:]
		if j := regexp.MustCompile(`\n(\s+-|\n)`).FindStringIndex(entry); j != nil {
			entry = entry[:j[0]]
		}
		if !strings.Contains(entry, tc.def) {
			t.Errorf("%s %s: want %s in %q", tc.cmd, tc.flag, tc.def, entry)
		}
	}
}

// The options a tracing command shares are grouped under headings, after
// the command's own; the words name every engine.
func TestHelpGroupsOptions(t *testing.T) {
	help := helpOf(t, "top", "--help")
	last := -1
	for _, h := range []string{"\nOptions:\n", "\nWhich server:\n", "\nTracing:\n", "\nOutput:\n"} {
		i := strings.Index(help, h)
		if i < last {
			t.Errorf("heading %q missing or out of order:\n%s", h, help)
		}
		last = i
	}
	if i, j := strings.Index(help, "--sort"), strings.Index(help, "\nWhich server:"); i > j {
		t.Errorf("top's own --sort is not listed before the shared groups:\n%s", help)
	}
	for _, engine := range []string{"PostgreSQL", "MySQL", "MariaDB"} {
		for _, args := range [][]string{{"--help"}, {"slowlog", "--help"}, {"doctor", "--help"}} {
			if !strings.Contains(helpOf(t, args...), engine) {
				t.Errorf("dbiolat %s does not name %s", strings.Join(args, " "), engine)
			}
		}
	}
}

// What scripts typed for Go's flag package still parses, to the same
// values as the GNU spelling: "-pid 42", "-min-query=0", "--o FILE".
func TestOldFlagSpellingsStillParse(t *testing.T) {
	parse := func(args ...string) (slowlogOptions, []string) {
		t.Helper()
		var o slowlogOptions
		fs := newFlagSet("slowlog")
		o.AddFlags(fs)
		pos, err := parseArgs(fs, args)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return o, pos
	}
	gnu, _ := parse("--pid", "42", "--min-query=0", "--fs", "--json", "--pgdata", "/d", "--duration", "2s")
	old, _ := parse("-pid", "42", "-min-query=0", "-fs", "-json=true", "-pgdata", "/d", "-duration=2s")
	if gnu != old {
		t.Errorf("GNU spelling gives %+v, Go's flag spelling %+v", gnu, old)
	}
	if gnu.PID != 42 || gnu.MinQuery != 0 || !gnu.FS || !gnu.JSON || gnu.PGData != "/d" || gnu.Duration != 2*time.Second || gnu.MinIO != -1 {
		t.Errorf("parsed %+v", gnu)
	}
	// A flag's value is never taken for a flag, and bcc-style positional
	// arguments stay where they are.
	o, pos := parse("1", "--pgdata", "-fs", "10", "-pid", "7", "--", "-json")
	if o.PGData != "-fs" || o.FS || o.PID != 7 || o.JSON || !slices.Equal(pos, []string{"1", "10", "-json"}) {
		t.Errorf("parsed %+v, positional %q", o, pos)
	}
	for _, args := range [][]string{{"-o", "f"}, {"--o", "f"}, {"--output", "f"}, {"-o=f"}, {"--output=f"}} {
		var out string
		fs := newFlagSet("record")
		fs.StringVarP(&out, "output", "o", "", "")
		if _, err := parseArgs(fs, args); err != nil || out != "f" {
			t.Errorf("%q: output %q, %v", args, out, err)
		}
	}
}

// A threshold is "off" or a duration of 0 or more; it shows as it parses.
func TestThresholdFlag(t *testing.T) {
	for in, want := range map[string]time.Duration{"off": -1, "0": 0, "0s": 0, "10ms": 10 * time.Millisecond, "1.5s": 1500 * time.Millisecond} {
		var d time.Duration
		fs := newFlagSet("t")
		thresholdVar(fs, &d, "min", "")
		if d != -1 || fs.Lookup("min").DefValue != "off" {
			t.Fatalf("default %v, shown %q: want off", d, fs.Lookup("min").DefValue)
		}
		if _, err := parseArgs(fs, []string{"--min", in}); err != nil || d != want {
			t.Errorf("--min %s: %v, %v; want %v", in, d, err, want)
		}
		if in != "0" && in != "1.5s" && fs.Lookup("min").Value.String() != in {
			t.Errorf("--min %s shows as %q", in, fs.Lookup("min").Value.String())
		}
	}
	for _, in := range []string{"-1ms", "soon", "-1", ""} {
		var d time.Duration
		fs := newFlagSet("t")
		thresholdVar(fs, &d, "min", "")
		if _, err := parseArgs(fs, []string{"--min=" + in}); err == nil {
			t.Errorf("--min=%s accepted as %v", in, d)
		}
	}
}

// Mistakes on the command line: one sentence on stderr, a non-zero exit
// (2 for no or an unknown command, as usage errors; 1 for a command's).
func TestCommandLineMistakes(t *testing.T) {
	var stderr bytes.Buffer
	cmd := exec.Command(binary)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || len(out) > 0 || !strings.Contains(stderr.String(), "slowlog") {
		t.Errorf("dbiolat alone: %v, stdout %q, stderr %q; want exit 2 and the commands on stderr", err, out, stderr.String())
	}
	for _, tc := range []struct {
		args []string
		want string
		exit int
	}{
		{[]string{"frob"}, `unknown command "frob"`, 2},
		{[]string{"help", "frob"}, `unknown command "frob"`, 2},
		{[]string{"--frob"}, "unknown flag: --frob", 1},
		{[]string{"iops", "--frobnicate"}, "flag provided but not defined: --frobnicate: run dbiolat iops --help", 1},
		{[]string{"slowlog", "-x"}, "flag provided but not defined: -x", 1},
		{[]string{"slowlog", "--min-query", "-1s"}, `invalid value "-1s" for --min-query: give a duration of 0 or more`, 1},
		{[]string{"slowlog", "--pid"}, "flag needs an argument", 1},
		{[]string{"top", "--interval", "soon"}, `invalid value "soon" for --interval`, 1},
		{[]string{"version", "now"}, `unexpected argument "now"`, 1},
		{[]string{"completion"}, "give one shell: bash, zsh or fish", 1},
		{[]string{"completion", "tcsh"}, `no completion for "tcsh"`, 1},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--otlp", "localhost:4318"}, `--otlp "localhost:4318": give the collector's OTLP URL`, 1},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--otlp", "http://h:70000"}, "port 70000 is not a port number", 1},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--otlp", "http://h:4318", "--otlp-sample", "2"}, "--otlp-sample 2: give a share from 0 to 1", 1},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--otlp", "http://h:4318", "--otlp-rate", "0"}, "--otlp-rate 0: give a positive number", 1},
		{[]string{"slowlog", "--otlp", "http://h:4318", "--raw-sql"}, "--otlp exports normalized query text only", 1},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(binary, tc.args...)
			wantOneSentence(t, cmd, tc.want)
			if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() != tc.exit {
				t.Errorf("exit %d, want %d", cmd.ProcessState.ExitCode(), tc.exit)
			}
		})
	}
}
