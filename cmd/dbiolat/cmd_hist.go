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

func runHistCmd(ctx context.Context, args []string) error {
	var o targetOptions
	fs := flag.NewFlagSet("hist", flag.ContinueOnError)
	o.AddFlags(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	interval, count, err := intervalArgs(pos, 0)
	if err != nil {
		return err
	}
	return runHist(ctx, o, interval, count)
}

// runHist prints the histograms at the end, or every interval when one is
// given (cumulative, as bcc's tools do without -r... here: since start).
func runHist(ctx context.Context, o targetOptions, interval time.Duration, count int) error {
	js := output.NewJSON(os.Stdout)
	t := tracer{opts: o, families: probe.All, interval: interval, count: count,
		onTick: func(s *session.Session) error {
			hs, err := s.Hists()
			if err != nil {
				return err
			}
			drops, err := s.Drops()
			if err != nil {
				return err
			}
			iv := &model.Interval{Type: "interval", TS: time.Now(), Seconds: interval.Seconds(), Hists: hs, Queries: s.Queries(), Drops: drops}
			if o.JSON {
				return js.Write(iv)
			}
			return output.Hists(os.Stdout, hs)
		}}
	s, err := t.run(ctx)
	if s == nil {
		return err
	}
	defer s.Close()
	sum, serr := summary(s, 0, true)
	if serr != nil {
		return serr
	}
	if o.JSON {
		_ = js.Write(sum)
		return err
	}
	if interval == 0 {
		if herr := output.Hists(os.Stdout, sum.Hists); herr != nil {
			return herr
		}
	}
	output.Summary(os.Stdout, sum)
	return err
}
