package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// Storage that serves the database's files from another process: the
// layers under the file system the verdict must follow.

// bindfsMount mounts bindfs, a FUSE file system passing through to a
// directory of the same disk (Longhorn's engine, in miniature: every read
// of the database becomes a request a userspace daemon serves with reads
// of its own), and returns the mount point, which PostgreSQL can use.
func bindfsMount(t *testing.T) string {
	t.Helper()
	testenv.NeedRoot(t)
	if _, err := exec.LookPath("bindfs"); err != nil {
		t.Fatal("bindfs is not installed (make deps installs it)")
	}
	dir, err := os.MkdirTemp("", "dbiolat-fuse-")
	if err != nil {
		t.Fatal(err)
	}
	src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	for _, d := range []string{dir, src, mnt} {
		os.MkdirAll(d, 0o755)
		os.Chmod(d, 0o755)
	}
	// allow_other: the mount is root's, PostgreSQL runs as postgres.
	if out, err := exec.Command("bindfs", "-o", "allow_other", src, mnt).CombinedOutput(); err != nil {
		t.Fatalf("bindfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		exec.Command("umount", mnt).Run()
		os.RemoveAll(dir)
	})
	return mnt
}

// PostgreSQL on a FUSE file system: each cold scan's reads are requests to
// the bindfs daemon, timed per query, and what the daemon did for them
// (its reads of the directory beneath, its block requests) is the query's,
// done for it by the daemon, which iops shows as a storage engine.
func TestFUSEEngineWorkIsTheQuerys(t *testing.T) {
	mnt := bindfsMount(t)
	c, err := pgsandbox.Start(context.Background(), pgsandbox.Options{Dir: mnt, Settings: map[string]string{"shared_buffers": "16MB"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	makeBigTable(t, c)

	file := filepath.Join(t.TempDir(), "fuse.dbiolat")
	tr := startTrace(t, "record", "--fs", "-o", file, "--pid", fmt.Sprint(c.PostmasterPID()))
	if !strings.Contains(tr.stderr.String(), "storage engine bindfs[") {
		t.Errorf("the trace does not say it found the storage engine: %s", tr.stderr.String())
	}
	dropCaches(t)
	psql(t, c, "SELECT count(*) FROM big WHERE id >= 0")
	r := tr.stopRecording(t)
	sum := r.Summary
	scans := only(t, slices.Collect(r.Queries), "SELECT count(*) FROM big", 1)
	q := scans[0]
	engineReads := uint64(0)
	if q.EngineFS != nil {
		engineReads = q.EngineFS.FSReadCount
	}
	t.Logf("cold scan on FUSE: %.1f ms, io wait %.1f ms; %d reads (%d missed) in %.1f ms; %d FUSE requests in %.1f ms (%d KiB), engine %d served %.1f ms with %d reads, %d block requests",
		ms(q.QueryNs), ms(q.IOWaitNs), q.FSReadCount, q.FSReadMissCount, ms(q.FSReadNs), q.FuseCount, ms(q.FuseNs), q.FuseBytes>>10,
		q.EnginePID, ms(q.EngineNs), engineReads, q.EngineBlkCount)
	// The table (about 140 MB) was cold: the scan's misses went to the
	// daemon as requests, which read the files beneath and went to the disk.
	if q.FuseCount == 0 || q.FuseBytes < 100<<20 {
		t.Errorf("the scan sent %d FUSE requests for %d bytes; its table is about 140 MB", q.FuseCount, q.FuseBytes)
	}
	if q.EnginePID == 0 || q.EngineNs == 0 || engineReads == 0 || q.EngineBlkCount == 0 || q.EngineBlkCount > q.BlkCount {
		t.Errorf("the engine's work is not the query's: engine %d, %d ns, %d reads, %d of %d block requests", q.EnginePID, q.EngineNs, engineReads, q.EngineBlkCount, q.BlkCount)
	}
	// The daemon answers each request inside the time the query waited for it.
	if q.EngineNs > q.FuseNs || q.FuseNs > q.QueryNs*uint64(max(1, q.FuseCount)) {
		t.Errorf("engine time %d ns, request time %d ns, query %d ns", q.EngineNs, q.FuseNs, q.QueryNs)
	}
	if h := sum.Hists["fuse"]; h == nil || h.Count < q.FuseCount {
		t.Errorf("the fuse histogram holds fewer requests than the scan sent: %v", h)
	}
}

// recordColdScans records (with --fs) two cold-cache scans of big on c.
func recordColdScans(t *testing.T, c *pgsandbox.Cluster, file string) {
	t.Helper()
	tr := startTrace(t, "record", "--fs", "-o", file, "--pid", fmt.Sprint(c.PostmasterPID()))
	for range 2 {
		dropCaches(t)
		psql(t, c, "SELECT count(*) FROM big WHERE id >= 0")
	}
	r := tr.stopRecording(t)
	only(t, slices.Collect(r.Queries), "SELECT count(*) FROM big", 2)
}

// The pair: the same scans on the plain disk, then behind bindfs.
// compare follows the scans' time from their I/O wait to their reads and
// on to the daemon's requests, and names the daemon.
func TestCompareNamesTheFUSEEngine(t *testing.T) {
	dir := t.TempDir()
	plain, fuse := filepath.Join(dir, "plain.dbiolat"), filepath.Join(dir, "fuse.dbiolat")
	settings := map[string]string{"shared_buffers": "16MB"}
	a := startPG(t, settings)
	makeBigTable(t, a)
	recordColdScans(t, a, plain)
	a.Stop()

	b, err := pgsandbox.Start(context.Background(), pgsandbox.Options{Dir: bindfsMount(t), Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop() })
	makeBigTable(t, b)
	recordColdScans(t, b, fuse)

	out, err := exec.Command(binary, "compare", plain, fuse).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "arises in the userspace storage engine bindfs[") {
		t.Errorf("compare does not name the FUSE engine")
	}
}
