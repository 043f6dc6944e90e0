package main

import (
	"context"
	"time"

	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
)

func runIOPSCmd(ctx context.Context, args []string) error {
	o, interval, count, err := parseIntervalCmd("iops", args, time.Second)
	if err != nil {
		return err
	}
	return runIOPS(ctx, o, interval, count)
}

func runIOPS(ctx context.Context, o targetOptions, interval time.Duration, count int) error {
	js := output.NewJSON(stdout)
	show := func(s *session.Session) error {
		iv, err := s.Interval()
		if err != nil {
			return err
		}
		if o.JSON {
			return js.Write(iv)
		}
		output.Rates(stdout, iv)
		return nil
	}
	// Queries are only counted; the scheduler family adds nothing to rates.
	fam := probe.PGWire | probe.FS | probe.Block
	t := tracer{opts: o, families: fam, emit: probe.EmitNone, interval: interval, count: count, onTick: show}
	s, err := t.run(ctx)
	if s == nil {
		return err
	}
	defer s.Close()
	if ctx.Err() != nil { // stopped mid-interval: show the part so totals add up
		if serr := show(s); serr != nil {
			return serr
		}
	}
	if ferr := finish(s, o, 0, false, false); ferr != nil {
		return ferr
	}
	return err
}
