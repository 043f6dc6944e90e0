package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/dbiolat/dbiolat/internal/htmlreport"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/record"
)

func runReportCmd(ctx context.Context, args []string) error {
	fs := newFlagSet("report")
	top := fs.Int("top", 10, "show the N query fingerprints, and the N applications, with the most total time")
	htmlOut := fs.String("html", "", "write the report as one self-contained HTML file (mode 0600) instead")
	cobra.MarkFlagFilename(fs, "html")
	slowest := fs.Int("slowest", 10, "with --html: the waterfall of the N slowest queries")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("give one recording file: dbiolat report FILE")
	}
	if *top < 1 || *slowest < 1 {
		return errors.New("--top and --slowest take a positive number")
	}
	r, err := record.Open(pos[0])
	if err != nil {
		return err
	}
	if *htmlOut != "" {
		return writeHTML(*htmlOut, func(w io.Writer) error {
			return htmlreport.Report(w, r, pos[0], htmlreport.Options{Top: *top, Slowest: *slowest})
		})
	}
	return report(r, *top)
}

// report prints a recording's terminal summary: where it ran, the query
// fingerprints by total time with their I/O share, the applications that
// sent them, and the histograms.
func report(r *record.Recording, top int) error {
	w := stdout
	server := cmp.Or(r.Meta["server"], "PostgreSQL "+r.Meta["postgres_version"]) // recordings before "server"
	fmt.Fprintf(w, "recording of %s (%s) on %s, kernel %s, %s CPUs\n", r.Meta["data_dir"], server,
		r.Meta["device"], r.Meta["kernel"], r.Meta["cpus"])
	fmt.Fprintf(w, "file system %s at %s (%s)\n", r.Meta["fs_type"], r.Meta["mount_point"], r.Meta["mount_options"])
	if r.Summary == nil {
		fmt.Fprintf(w, "the recording was interrupted: it has no summary; what it holds is shown\n")
	}
	if len(r.Fio) > 0 {
		fmt.Fprintf(w, "\nfio reference on %s:\n", r.Meta["bench_dir"])
		output.FioTable(w, r.Fio)
	}

	fps := output.ByFingerprint(r.Queries)
	output.FingerprintTable(w, fps, top)
	if err := r.Err(); err != nil {
		return err
	}
	output.ApplicationTable(w, output.ByApplication(r.Queries), top)
	if err := r.Err(); err != nil {
		return err
	}
	for _, p := range output.BackgroundRuns(r.Processes) { // connections are their queries
		fmt.Fprintln(w, output.ProcessLine(&p))
	}
	if r.Summary != nil {
		if err := output.Hists(w, r.Summary.Hists); err != nil {
			return err
		}
		if err := output.WaitHists(w, r.Summary.WaitHists); err != nil {
			return err
		}
		output.Summary(w, output.Recorded(r.Summary, fps))
	}
	return nil
}

// writeHTML writes an HTML file mode 0600 (query texts are private),
// replacing one that exists, and says where it went.
func writeHTML(path string, render func(io.Writer) error) error {
	var b bytes.Buffer
	if err := render(&b); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil { // a file that existed keeps its mode otherwise
		f.Close()
		return err
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", path)
	return nil
}
