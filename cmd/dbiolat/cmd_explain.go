package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/probe"
)

type explainOptions struct {
	targetOptions
	Top      int
	MinQuery time.Duration
}

func runExplainCmd(ctx context.Context, args []string) error {
	var o explainOptions
	fs := newFlagSet("explain")
	o.AddFlags(fs)
	fs.IntVar(&o.Top, "top", 5, "show the N slowest queries")
	fs.DurationVar(&o.MinQuery, "min-query", time.Millisecond, "consider only queries at least this long, which keeps tracing a busy database cheap")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q: explain takes only options", pos[0])
	}
	if o.Top < 1 {
		return fmt.Errorf("--top %d: give a positive number of queries", o.Top)
	}
	return runExplain(ctx, o)
}

// runExplain traces until stopped, then shows the waterfall of the slowest
// queries as trees.
func runExplain(ctx context.Context, o explainOptions) error {
	var slowest []model.Query // at most o.Top, slowest first
	t := tracer{opts: o.targetOptions, families: probe.Default, emit: probe.Emit{MinQuery: o.MinQuery, MinFS: -1},
		onQuery: func(q *model.Query) error {
			i := sort.Search(len(slowest), func(i int) bool { return slowest[i].QueryNs < q.QueryNs })
			if i < o.Top {
				slowest = append(slowest[:i], append([]model.Query{*q}, slowest[i:]...)...)
				if len(slowest) > o.Top {
					slowest = slowest[:o.Top]
				}
			}
			return nil
		}}
	s, err := t.run(ctx)
	if s == nil {
		return err
	}
	defer s.Close()
	js := output.NewJSON(stdout)
	for i := range slowest {
		if o.JSON {
			if werr := js.Write(&slowest[i]); werr != nil {
				return werr
			}
		} else {
			output.Tree(stdout, &slowest[i])
		}
	}
	if len(slowest) == 0 && !o.JSON {
		fmt.Fprintf(stdout, "no query took %s or more\n", o.MinQuery)
	}
	if ferr := finish(s, o.targetOptions, uint64(len(slowest)), false, false); ferr != nil {
		return ferr
	}
	return err
}
