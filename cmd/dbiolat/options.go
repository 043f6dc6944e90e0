package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// errHelp ends a command that printed its usage on request.
var errHelp = errors.New("help shown")

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

func (o *targetOptions) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.PID, "pid", 0, "trace the server this process belongs to: a PostgreSQL postmaster or any of its backends, a mysqld or mariadbd (or one of its threads)")
	fs.StringVar(&o.PGData, "pgdata", "", "trace the server (PostgreSQL, MySQL or MariaDB) serving this data directory, as the host or the server's container sees it")
	fs.StringVar(&o.PGData, "datadir", "", "the same as --pgdata (mysqld's name for it)")
	fs.DurationVar(&o.Duration, "duration", 0, "stop after this long (e.g. 30s); default: until Ctrl-C")
	fs.BoolVar(&o.JSON, "json", false, "print JSON lines, one object per record or interval, and a final summary object")
	fs.BoolVar(&o.RawSQL, "raw-sql", false, "show query text with its literals (default: literals replaced by $n)")
	fs.BoolVar(&o.FS, "fs", false, "time every file system call (reads as page-cache hits or misses, writes, syncs); costs every syscall on the machine the kernel's slower path")
	fs.BoolVar(&o.USDT, "usdt", false, "take queries from PostgreSQL's USDT probes instead of the client protocol: sees GSS-encrypted connections' simple-protocol queries too, misses extended-protocol ones, costs a trap per probe")
	fs.BoolVar(&o.Buffers, "buffers", false, "count shared-buffer hits and reads per query (a probe on every buffer access: costly)")
}

// parseArgs parses flags placed before, between or after positional
// arguments (bcc style: "iops 1 10 --pid 42"), and turns flag errors into
// one sentence.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(os.Stderr)
				fmt.Fprintf(os.Stderr, "usage: dbiolat %s [options]%s\n\noptions:\n", fs.Name(), positionalHelp[fs.Name()])
				fs.PrintDefaults()
				return nil, errHelp
			}
			return nil, fmt.Errorf("%v: run dbiolat %s -h for its options", err, fs.Name())
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

var positionalHelp = map[string]string{
	"hist": " [interval [count]]",
	"iops": " [interval [count]]",
}

// parseIntervalCmd parses the options and the "[interval [count]]" of a
// periodic command (hist, iops).
func parseIntervalCmd(name string, args []string, def time.Duration) (o targetOptions, interval time.Duration, count int, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	o.AddFlags(fs)
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
