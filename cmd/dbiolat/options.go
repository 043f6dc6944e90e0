package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// helpRequest ends a command asked for --help before it did anything: it
// carries the command's flags, for main to print them (and to learn them:
// see flagsOf).
type helpRequest struct{ flags *pflag.FlagSet }

func (*helpRequest) Error() string { return "help requested" }

// newFlagSet is a command's flag set: GNU-style --long flags, parsed by
// parseArgs, which turns every error into one sentence.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.Usage = func() {} // parseArgs and main print help, not pflag
	fs.SortFlags = false // help lists flags as defined: --pid before --pgdata
	fs.SetOutput(io.Discard)
	return fs
}

// groupAnnotation names the heading a flag is listed under in --help;
// flags without one are listed first, under "Options".
const groupAnnotation = "dbiolat_group"

// group lists the named flags under heading in --help.
func group(fs *pflag.FlagSet, heading string, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, groupAnnotation, []string{heading}); err != nil {
			panic(err) // a misspelt name in our own definitions
		}
	}
}

// choicesAnnotation lists the values a flag takes, for completion.
const choicesAnnotation = "dbiolat_choices"

// choices says which values a flag takes: completion offers them.
func choices(fs *pflag.FlagSet, name string, values ...string) {
	if err := fs.SetAnnotation(name, choicesAnnotation, values); err != nil {
		panic(err) // a misspelt name in our own definitions
	}
}

// targetOptions are shared by every command that traces.
type targetOptions struct {
	PID      int
	PGData   string
	Duration time.Duration
	JSON     bool
	RawSQL   bool
	Buffers  bool
	FS       bool
	USDT     bool
}

func (o *targetOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.PID, "pid", 0, "trace the server this process belongs to: a PostgreSQL postmaster or any of its backends, a mysqld or mariadbd (or one of its threads)")
	fs.StringVar(&o.PGData, "pgdata", "", "trace the server (PostgreSQL, MySQL or MariaDB) serving this data directory, as the host or the server's container sees it")
	fs.StringVar(&o.PGData, "datadir", "", "the same as --pgdata (mysqld's name for it)")
	fs.DurationVar(&o.Duration, "duration", 0, "stop after this long (e.g. 30s); default: until Ctrl-C")
	fs.BoolVar(&o.FS, "fs", false, "time every file system call (reads as page-cache hits or misses, writes, syncs); costs every syscall on the machine the kernel's slower path")
	fs.BoolVar(&o.USDT, "usdt", false, "take PostgreSQL's queries from its USDT probes instead of the client protocol: sees GSS-encrypted connections' simple-protocol queries too, misses extended-protocol ones, costs a trap per probe")
	fs.BoolVar(&o.Buffers, "buffers", false, "count PostgreSQL's shared-buffer hits and reads per query (a probe on every buffer access: costly)")
	fs.BoolVar(&o.JSON, "json", false, "print JSON lines, one object per record or interval, and a final summary object")
	fs.BoolVar(&o.RawSQL, "raw-sql", false, "show query text with its literals (default: literals replaced by $n)")
	cobra.MarkFlagDirname(fs, "pgdata")
	cobra.MarkFlagDirname(fs, "datadir")
	group(fs, "Which server", "pid", "pgdata", "datadir")
	group(fs, "Tracing", "duration", "fs", "usdt", "buffers")
	group(fs, "Output", "json", "raw-sql")
}

// fsAlways says in the help of a command that shows every layer (it
// traces probe.All) that it times file system calls whatever --fs says.
func fsAlways(fs *pflag.FlagSet) {
	fs.Lookup("fs").Usage = "always on here (every layer is shown): file system calls timed; costs every syscall on the machine the kernel's slower path"
}

// threshold is a duration option that can be off: "off" (stored as -1),
// or a duration of 0 or more.
type threshold struct{ d *time.Duration }

func (t threshold) String() string {
	if t.d == nil || *t.d < 0 {
		return "off"
	}
	return t.d.String()
}

func (t threshold) Set(s string) error {
	if s == "off" {
		*t.d = -1
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return errors.New(`give a duration of 0 or more (e.g. 10ms), or "off"`)
	}
	*t.d = d
	return nil
}

func (threshold) Type() string { return "duration" }

// thresholdVar defines a threshold flag, off unless given.
func thresholdVar(fs *pflag.FlagSet, d *time.Duration, name, usage string) {
	*d = -1
	fs.Var(threshold{d}, name, usage)
	choices(fs, name, "off")
}

// parseArgs parses flags placed before, between or after positional
// arguments (bcc style: "iops 1 10 --pid 42"), and turns flag errors into
// one sentence. Asked for --help it returns a *helpRequest: a command
// defines its flags and does nothing else before calling parseArgs, which
// is how main learns each command's flags for help and completion.
func parseArgs(fs *pflag.FlagSet, args []string) ([]string, error) {
	err := fs.Parse(longFlags(fs, args))
	if errors.Is(err, pflag.ErrHelp) {
		return nil, &helpRequest{fs}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: run dbiolat %s --help for its options", flagError(err), fs.Name())
	}
	return fs.Args(), nil
}

// flagError says what was wrong with the flags in the words Go's flag
// package used before (scripts and tests match them).
func flagError(err error) string {
	var notExist *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	switch {
	case errors.As(err, &notExist) && notExist.GetSpecifiedShortnames() != "":
		return "flag provided but not defined: -" + notExist.GetSpecifiedShortnames()
	case errors.As(err, &notExist):
		return "flag provided but not defined: --" + notExist.GetSpecifiedName()
	case errors.As(err, &invalid):
		return fmt.Sprintf("invalid value %q for --%s: %v", invalid.GetValue(), invalid.GetFlag().Name, errors.Unwrap(invalid))
	}
	return err.Error()
}

// longFlags turns the single-dash long flags Go's flag package accepted
// ("-pid 42", "-min-query=0") into GNU ones, so that scripts written for
// earlier versions keep working; a flag's value is left alone.
func longFlags(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		out = append(out, a)
		if a == "--" {
			return append(out, args[i+1:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f, dashes := fs.Lookup(name), "--"
		if f == nil && len(name) == 1 {
			f, dashes = fs.ShorthandLookup(name), "-" // "--o FILE" as well as "-o FILE"
		}
		if f == nil {
			continue
		}
		out[len(out)-1] = dashes + strings.TrimLeft(a, "-")
		if !hasValue && f.NoOptDefVal == "" && i+1 < len(args) {
			i++ // the flag's value, whatever it looks like
			out = append(out, args[i])
		}
	}
	return out
}

// parseIntervalCmd parses the options and the "[interval [count]]" of a
// periodic command (hist, iops).
func parseIntervalCmd(name string, args []string, def time.Duration) (o targetOptions, interval time.Duration, count int, err error) {
	fs := newFlagSet(name)
	o.AddFlags(fs)
	fsAlways(fs) // hist and iops show the file system layer
	pos, err := parseArgs(fs, args)
	if err != nil {
		return o, 0, 0, err
	}
	interval, count, err = intervalArgs(pos, def)
	return o, interval, count, err
}

// intervalArgs reads the optional "interval [count]" of bcc tools.
func intervalArgs(pos []string, def time.Duration) (time.Duration, int, error) {
	interval, count := def, 0
	if len(pos) > 2 {
		return 0, 0, fmt.Errorf("too many arguments %q: expected [interval [count]]", pos)
	}
	if len(pos) >= 1 {
		secs, err := strconv.ParseFloat(pos[0], 64)
		if err != nil || secs <= 0 {
			return 0, 0, fmt.Errorf("interval %q is not a positive number of seconds", pos[0])
		}
		interval = time.Duration(secs * float64(time.Second))
	}
	if len(pos) == 2 {
		n, err := strconv.Atoi(pos[1])
		if err != nil || n <= 0 {
			return 0, 0, fmt.Errorf("count %q is not a positive whole number", pos[1])
		}
		count = n
	}
	return interval, count, nil
}
