package main

import (
	"context"
	"time"

	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
)

func runHistCmd(ctx context.Context, args []string) error {
	o, interval, count, err := parseIntervalCmd("hist", args, 0)
	if err != nil {
		return err
	}
	return runHist(ctx, o, interval, count)
}

// runHist prints the histograms at the end, or every interval when one is
// given; they are cumulative since the start.
func runHist(ctx context.Context, o targetOptions, interval time.Duration, count int) error {
	js := output.NewJSON(stdout)
	t := tracer{opts: o, families: probe.All, emit: probe.EmitNone, interval: interval, count: count,
		onTick: func(s *session.Session) error {
			iv, err := s.Interval()
			if err != nil {
				return err
			}
			iv.Rates = nil
			if iv.Hists, err = s.Hists(); err != nil {
				return err
			}
			if iv.WaitHists, err = s.WaitHists(); err != nil {
				return err
			}
			if o.JSON {
				return js.Write(iv)
			}
			if err := output.Hists(stdout, iv.Hists); err != nil {
				return err
			}
			return output.WaitHists(stdout, iv.WaitHists)
		}}
	s, err := t.run(ctx)
	if s == nil {
		return err
	}
	defer s.Close()
	if ferr := finish(s, o, 0, true, interval == 0); ferr != nil {
		return ferr
	}
	return err
}
