package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/probe"
)

type slowlogOptions struct {
	targetOptions
	MinQuery time.Duration
	MinIO    time.Duration
}

func (o *slowlogOptions) AddFlags(fs *flag.FlagSet) {
	o.targetOptions.AddFlags(fs)
	fs.DurationVar(&o.MinQuery, "min-query", -1, "report queries that took at least this long (0 = every query)")
	fs.DurationVar(&o.MinIO, "min-io", -1, "report queries whose file system time reached this")
}

// report says whether a query passes the thresholds: any threshold given
// that it reaches; with none given, every query that did I/O.
func (o *slowlogOptions) report(q *model.Query) bool {
	if o.MinQuery < 0 && o.MinIO < 0 {
		return q.DidIO()
	}
	return (o.MinQuery >= 0 && q.QueryNs >= uint64(o.MinQuery)) ||
		(o.MinIO >= 0 && q.FSNs() >= uint64(o.MinIO))
}

func runSlowlogCmd(ctx context.Context, args []string) error {
	var o slowlogOptions
	fs := flag.NewFlagSet("slowlog", flag.ContinueOnError)
	o.AddFlags(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q: slowlog takes only options", pos[0])
	}
	return runSlowlog(ctx, o)
}

func runSlowlog(ctx context.Context, o slowlogOptions) error {
	js := output.NewJSON(os.Stdout)
	var reported uint64
	t := tracer{opts: o.targetOptions, families: probe.All, onQuery: func(q *model.Query) error {
		if !o.report(q) {
			return nil
		}
		reported++
		if o.JSON {
			return js.Write(q)
		}
		_, err := fmt.Println(output.SlowLine(q))
		return err
	}}
	s, err := t.run(ctx)
	if s == nil {
		return err
	}
	defer s.Close()
	sum, serr := summary(s, reported, false)
	if serr != nil {
		return serr
	}
	if o.JSON {
		_ = js.Write(sum)
	} else {
		output.Summary(os.Stdout, sum)
	}
	return err
}
