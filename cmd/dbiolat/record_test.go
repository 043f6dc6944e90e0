package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/record"
)

// record → report: every statement pgbench ran is in the recording, and
// the report reads it back.
func TestRecordThenReport(t *testing.T) {
	c := startPG(t, nil)
	if _, err := c.Pgbench(context.Background(), "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "run.dbiolat")
	tr := startTrace(t, "record", "-o", file, "--interval", "0.5s", "--pid", fmt.Sprint(c.PostmasterPID()))
	if _, err := c.Pgbench(context.Background(), "postgres", "-n", "-c", "2", "-t", "100"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("record: %v: %s", err, tr.stderr.String())
	}
	r, err := record.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	updates := 0
	for _, q := range r.Queries {
		if strings.HasPrefix(q.Query, "UPDATE pgbench_accounts") {
			updates++
		}
	}
	if updates != 200 || r.Summary == nil || len(r.Intervals) == 0 || r.Meta["postgres_version"] != "15" {
		t.Errorf("recording: %d account updates (want 200), summary %v, %d intervals, meta %v", updates, r.Summary != nil, len(r.Intervals), r.Meta)
	}
	out, err := exec.Command(binary, "report", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "UPDATE pgbench_accounts") || !strings.Contains(string(out), "nothing dropped") {
		t.Errorf("report: %v\n%s", err, out)
	}
}

// A recording whose writer was killed with SIGKILL still reports what it had.
func TestKilledRecordingStillReports(t *testing.T) {
	c := startPG(t, nil)
	file := filepath.Join(t.TempDir(), "killed.dbiolat")
	tr := startTrace(t, "record", "-o", file, "--interval", "0.2s", "--pid", fmt.Sprint(c.PostmasterPID()))
	for i := 0; i < 20; i++ {
		psql(t, c, "SELECT pg_sleep(0.05)")
	}
	tr.cmd.Process.Signal(syscall.SIGKILL)
	tr.cmd.Wait()
	out, err := exec.Command(binary, "report", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "interrupted") || !strings.Contains(string(out), "pg_sleep") {
		t.Errorf("report of a killed recording: %v\n%s", err, out)
	}
	out, err = exec.Command(binary, "report", "/etc/hostname").CombinedOutput()
	if msg := strings.TrimSpace(string(out)); err == nil || strings.Contains(msg, "\n") || !strings.Contains(msg, "not a readable dbiolat recording") {
		t.Errorf("report of a foreign file: %v: %q", err, msg)
	}
}
