package main

import (
	"context"
	"flag"
	"os"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
)

func runIOPSCmd(ctx context.Context, args []string) error {
	var o targetOptions
	fs := flag.NewFlagSet("iops", flag.ContinueOnError)
	o.AddFlags(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	interval, count, err := intervalArgs(pos, time.Second)
	if err != nil {
		return err
	}
	return runIOPS(ctx, o, interval, count)
}

func runIOPS(ctx context.Context, o targetOptions, interval time.Duration, count int) error {
	js := output.NewJSON(os.Stdout)
	// The scheduler family adds nothing to rates.
	fam := probe.Families{Query: true, FS: true, Block: true}
	lastQueries := uint64(0)
	t := tracer{opts: o, families: fam, interval: interval, count: count,
		onTick: func(s *session.Session) error {
			rates, err := s.Rates()
			if err != nil {
				return err
			}
			drops, err := s.Drops()
			if err != nil {
				return err
			}
			iv := &model.Interval{Type: "interval", TS: time.Now(), Seconds: interval.Seconds(), Rates: rates,
				Queries: s.Queries() - lastQueries, Drops: drops}
			lastQueries = s.Queries()
			if o.JSON {
				return js.Write(iv)
			}
			output.Rates(os.Stdout, iv)
			return nil
		}}
	s, err := t.run(ctx)
	if s == nil {
		return err
	}
	defer s.Close()
	sum, serr := summary(s, 0, false)
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
