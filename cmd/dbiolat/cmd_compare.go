package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dbiolat/dbiolat/internal/htmlreport"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/record"
)

func runCompareCmd(ctx context.Context, args []string) error {
	fs := newFlagSet("compare")
	asJSON := fs.Bool("json", false, "print the comparison as one JSON object")
	top := fs.Int("top", 10, "list the N query fingerprints in both recordings whose total time changed most")
	htmlOut := fs.String("html", "", "write the comparison as one self-contained HTML file (mode 0600) instead")
	cobra.MarkFlagFilename(fs, "html")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errors.New("give two recordings: dbiolat compare A B")
	}
	if *top < 1 {
		return fmt.Errorf("--top %d: give a positive number of fingerprints", *top)
	}
	var recs [2]*record.Recording
	for i, path := range pos {
		if recs[i], err = record.Open(path); err != nil {
			return err
		}
		if recs[i].Summary == nil {
			return fmt.Errorf("%s was interrupted and has no histograms: compare needs recordings that ended normally", path)
		}
	}
	c := output.Compare(recs[0].Summary.Hists, recs[1].Summary.Hists)
	c.Queries, c.Common = output.QueryDeltas(recs[0].Queries, recs[1].Queries, *top)
	if steps, verdict := output.Chain(recs[0].Queries, recs[1].Queries, recs[0].Meta, recs[1].Meta); verdict != "" {
		c.Chain, c.Verdict = steps, verdict
	}
	if err := cmp.Or(recs[0].Err(), recs[1].Err()); err != nil {
		return err
	}
	c.Fio = output.CompareFio(recs[0].Fio, recs[1].Fio)
	if *htmlOut != "" {
		return writeHTML(*htmlOut, func(w io.Writer) error {
			return htmlreport.Compare(w, c, htmlreport.Side{Name: pos[0], Rec: recs[0]}, htmlreport.Side{Name: pos[1], Rec: recs[1]})
		})
	}
	if *asJSON {
		return output.NewJSON(stdout).Write(c)
	}
	fmt.Fprintf(stdout, "A: %s on %s (%s)\nB: %s on %s (%s)\n\n", pos[0], recs[0].Meta["device"], recs[0].Meta["fs_type"],
		pos[1], recs[1].Meta["device"], recs[1].Meta["fs_type"])
	output.PrintComparison(stdout, c)
	return nil
}
