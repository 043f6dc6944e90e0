package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// record → report: every statement pgbench ran is in the recording, and
// the report reads it back.
func TestRecordThenReport(t *testing.T) {
	sideBySide(t)
	c := startPG(t, nil)
	if _, err := c.Pgbench(context.Background(), "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "run.dbiolat")
	tr := startTrace(t, "record", "--fs", "-o", file, "--interval", "0.5s", "--pid", fmt.Sprint(c.PostmasterPID()))
	if _, err := c.Pgbench(context.Background(), "postgres", "-n", "-c", "2", "-t", "100"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("record: %v: %s", err, tr.stderr.String())
	}
	r := openRecording(t, file)
	updates := 0
	for q := range r.Queries {
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
	sideBySide(t)
	c := startPG(t, nil)
	file := filepath.Join(t.TempDir(), "killed.dbiolat")
	tr := startTrace(t, "record", "--fs", "-o", file, "--interval", "0.2s", "--pid", fmt.Sprint(c.PostmasterPID()))
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

// Two storage setups on one machine: the same cold scans, then with reads
// throttled by a cgroup v1 blkio limit. The throttle holds bios before
// they become requests, so compare must find the time added above the
// block device, by about the factor the limit implies.
func TestCompareFindsTheLayer(t *testing.T) {
	c := startPG(t, nil)
	psql(t, c, "CREATE TABLE cmp AS SELECT g AS id, repeat('c', 300) AS pad FROM generate_series(1, 100000) g; CHECKPOINT")
	dir := t.TempDir()
	recordScans := func(name string) string {
		file := filepath.Join(dir, name)
		tr := startTrace(t, "record", "--fs", "-o", file, "--pid", fmt.Sprint(c.PostmasterPID()))
		for i := 0; i < 2; i++ {
			dropCaches(t)
			psql(t, c, "SELECT count(*) FROM cmp WHERE id >= 0")
		}
		tr.cmd.Process.Signal(syscall.SIGINT)
		if err := tr.cmd.Wait(); err != nil {
			t.Fatalf("record: %v: %s", err, tr.stderr.String())
		}
		return file
	}
	a := recordScans("plain.dbiolat")
	throttleReads(t, c, 20<<20)
	b := recordScans("throttled.dbiolat")

	out, err := exec.Command(binary, "compare", a, b).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
	js, err := exec.Command(binary, "compare", "--json", a, b).Output()
	if err != nil {
		t.Fatal(err)
	}
	var cmp struct {
		Verdict string
		Layers  []struct {
			Layer     string
			MeanRatio float64 `json:"mean_ratio"`
		}
	}
	if err := json.Unmarshal(js, &cmp); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cmp.Verdict, "above the block device") {
		t.Errorf("verdict %q does not place the difference above the block device", cmp.Verdict)
	}
	for _, l := range cmp.Layers {
		if l.Layer == "fs_read_miss" && l.MeanRatio < 3 {
			t.Errorf("read misses only %.2fx slower under a 20 MB/s limit", l.MeanRatio)
		}
	}
}
