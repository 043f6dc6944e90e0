package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/record"
	"github.com/dbiolat/dbiolat/internal/session"
)

type recordOptions struct {
	targetOptions
	Output   string
	Interval time.Duration
	MinQuery time.Duration
	// keepPrivileges: bench runs its workload as other users meanwhile.
	keepPrivileges bool
}

func runRecordCmd(ctx context.Context, args []string) error {
	var o recordOptions
	fs := newFlagSet("record")
	o.AddFlags(fs)
	fs.StringVarP(&o.Output, "output", "o", "", "the recording file to create (required)")
	cobra.MarkFlagFilename(fs, "output")
	fs.DurationVar(&o.Interval, "interval", time.Second, "how often to record rates")
	fs.DurationVar(&o.MinQuery, "min-query", 0, "record queries at least this long (0: every query)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q: record takes only options", pos[0])
	}
	if o.Output == "" {
		return errors.New("say where to write the recording with -o FILE")
	}
	if o.Interval <= 0 {
		return fmt.Errorf("--interval %s: give a positive duration", o.Interval)
	}
	return runRecord(ctx, o)
}

// runRecord writes everything a trace sees into a new recording file.
func runRecord(ctx context.Context, o recordOptions) error {
	// Created before attaching, so that a path that cannot be written fails first.
	w, err := record.Create(o.Output, nil)
	if err != nil {
		return err
	}
	attached := false
	sum, err := recordTrace(ctx, o, func(s *session.Session) (*record.Writer, error) {
		attached = true
		w.Meta(record.Environment(s.Server()))
		return w, nil
	})
	err = cmp.Or(err, w.Close())
	if !attached { // nothing was traced: leave no empty recording behind
		os.Remove(o.Output)
	}
	if err == nil && sum != nil {
		fmt.Fprintf(os.Stderr, "recorded %d queries in %.1fs to %s\n", sum.Queries, sum.Seconds, o.Output)
	}
	return err
}

// recordTrace traces until ctx ends and writes into the writer that open
// returns once the probes are attached: query records, process runs, and
// per-interval rates, flushed every interval so that an interrupted
// recording keeps what it had; at the end the summary with the
// histograms and drops, which it also returns.
func recordTrace(ctx context.Context, o recordOptions, open func(*session.Session) (*record.Writer, error)) (*model.Summary, error) {
	var w *record.Writer
	var written uint64 // the summary's "reported": the queries the recording holds
	t := tracer{opts: o.targetOptions, families: probe.Default, interval: o.Interval, keepPrivileges: o.keepPrivileges,
		emit: probe.Emit{MinQuery: o.MinQuery, MinFS: -1},
		onStart: func(s *session.Session) (err error) {
			w, err = open(s)
			return err
		},
		onQuery: func(q *model.Query) error {
			written += uint64(q.Statements)
			return w.Query(q)
		},
		onProcess: func(p *model.Process) error { w.Process(p); return nil },
		onTick: func(s *session.Session) error {
			iv, err := s.Interval()
			if err != nil {
				return err
			}
			w.Interval(iv)
			return w.Flush()
		}}
	s, err := t.run(ctx)
	if s == nil {
		return nil, err
	}
	defer s.Close()
	if iv, ierr := s.Interval(); ierr == nil { // the part since the last tick
		w.Interval(iv)
	}
	sum, serr := s.Summary(written, true)
	if serr != nil {
		return nil, cmp.Or(err, serr)
	}
	w.Summary(sum)
	return sum, cmp.Or(err, w.Flush())
}
