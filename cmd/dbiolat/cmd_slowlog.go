package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/probe"
)

type slowlogOptions struct {
	targetOptions
	MinQuery time.Duration
	MinIO    time.Duration
	OTLP     otlpOptions
}

func (o *slowlogOptions) AddFlags(fs *pflag.FlagSet) {
	o.targetOptions.AddFlags(fs)
	thresholdVar(fs, &o.MinQuery, "min-query", "report queries that took at least this long (0: every query); with neither --min-query nor --min-io, every query that did I/O")
	thresholdVar(fs, &o.MinIO, "min-io", "report queries whose file system time reached this")
	o.OTLP.AddFlags(fs, false) // its thresholds choose what --otlp sends
}

// emit says which queries to report: those reaching any threshold given;
// with none given, every query that did I/O. The kernel applies it.
func (o *slowlogOptions) emit() probe.Emit {
	return probe.Emit{MinQuery: o.MinQuery, MinFS: o.MinIO, IfIO: o.MinQuery < 0 && o.MinIO < 0}
}

func runSlowlogCmd(ctx context.Context, args []string) error {
	var o slowlogOptions
	fs := newFlagSet("slowlog")
	o.AddFlags(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return fmt.Errorf("unexpected argument %q: slowlog takes only options", pos[0])
	case o.OTLP.Endpoint != "" && o.RawSQL:
		return errors.New("--otlp exports normalized query text only: leave out --raw-sql")
	}
	return runSlowlog(ctx, o)
}

func runSlowlog(ctx context.Context, o slowlogOptions) error {
	x, err := o.OTLP.start(ctx) // nil without --otlp
	if err != nil {
		return err
	}
	js := output.NewJSON(stdout)
	var reported uint64
	var line []byte
	t := tracer{opts: o.targetOptions, families: probe.Default, emit: o.emit(), onQuery: func(q *model.Query) error {
		reported++
		if x != nil {
			x.Offer(q)
		}
		if o.JSON {
			return js.Write(q)
		}
		line = append(output.AppendSlowLine(line[:0], q), '\n')
		_, err := stdout.Write(line)
		return err
	}, onProcess: func(p *model.Process) error {
		// Background runs (autovacuum, parallel workers…) have no query
		// of their own: their whole run is the line. Connections are not.
		if !output.Background(p) {
			return nil
		}
		if o.JSON {
			return js.Write(p)
		}
		_, err := fmt.Fprintln(stdout, output.ProcessLine(p))
		return err
	}}
	s, err := t.run(ctx)
	exported := closeOTLP(x)
	if s == nil {
		printOTLP(exported)
		return err
	}
	defer s.Close()
	if ferr := finishWith(s, o.targetOptions, reported, false, false, exported); ferr != nil {
		return ferr
	}
	return err
}
