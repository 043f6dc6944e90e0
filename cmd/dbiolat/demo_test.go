package main

// The demo of the README's first command, on a smaller table: each step's
// lines appear under its own heading, and it ends with the summary.

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

func TestDemoShowsEachStepUnderItsHeading(t *testing.T) {
	testenv.NeedRoot(t)
	var out bytes.Buffer
	cmd := exec.Command(binary, "demo", "--scale", "3", "--seconds", "1")
	cmd.Stdout, cmd.Stderr = &out, &out // one pipe: the order a terminal shows
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	text := out.String()
	t.Logf("%s", text)
	// The text between a heading and the next.
	under := func(heading, next string) string {
		i, j := strings.Index(text, "==> "+heading), strings.Index(text, "==> "+next)
		if i < 0 || j < i {
			t.Fatalf("no heading %q followed by %q", heading, next)
		}
		return text[i:j]
	}
	const scan = "SELECT count(*) FROM pgbench_accounts"
	for _, step := range []struct{ heading, next string }{
		{"cold-cache full scan", "the same scan, warm"},
		{"the same scan, warm", "read-only workload"},
	} {
		if n := strings.Count(under(step.heading, step.next), scan); n != 1 {
			t.Errorf("%d scan lines under %q, want 1", n, step.heading)
		}
	}
	if !strings.Contains(text, "traced ") || !strings.Contains(text, "file system read latency") {
		t.Errorf("the demo ends without its histograms and summary")
	}
}

// The demo on MariaDB: the same steps, its scan a line under each heading,
// sysbench's statements after. Scale 3 (a 45 MB table) is the smallest
// larger than the server's 32 MB buffer pool: the cold scan must read
// megabytes from the disk, far over the demo's 1 ms of I/O for a line. At
// scale 1 the pool held the table, and whether the scan made a line
// (50 ms) depended on the machine's speed that minute.
func TestDemoOnMariaDB(t *testing.T) {
	testenv.NeedRoot(t)
	var out bytes.Buffer
	cmd := exec.Command(binary, "demo", "--engine", "mariadb", "--scale", "3", "--seconds", "1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	text := out.String()
	t.Logf("%s", text)
	for _, want := range []string{"==> cold-cache full scan", "==> read-write workload", "root@sbtest", "file system read latency", "traced "} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo on MariaDB lacks %q", want)
		}
	}
}
