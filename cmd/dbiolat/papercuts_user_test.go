package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What users read, end to end (issue 28): a CHECKPOINT's slow-log line
// names the wait its other-wait box holds, and no wait histogram gives a
// quantile beyond what it recorded.

// waitHistLine is a wait event's histogram in hist's text output.
var waitHistLine = regexp.MustCompile(`(?m)^sleeps of queries on wait event (\S+): count (\d+), total (\S+), mean (\S+), p50 (\S+), p99 (\S+)$`)

func TestUserPapercuts(t *testing.T) {
	c := startPG(t, map[string]string{"checkpoint_timeout": "1h", "max_wal_size": "4GB"})
	psql(t, c, "CREATE TABLE dirty AS SELECT g AS id, repeat('d', 200) AS pad FROM generate_series(1, 100000) g; CHECKPOINT")
	psql(t, c, "UPDATE dirty SET pad = repeat('e', 200)") // pages for the checkpoint to write: it takes a while
	pid := fmt.Sprint(c.PostmasterPID())
	slow := startTrace(t, "slowlog", "--min-query", "0", "--pid", pid)
	hist := startTrace(t, "hist", "--pid", pid)
	psql(t, c, "CHECKPOINT")
	psql(t, c, "SELECT pg_sleep(0.2)") // one sleep: its histogram holds one value
	log, hists := slow.stopText(t), hist.stopText(t)

	// The client that asks for a checkpoint sleeps until the checkpointer
	// is done (IPC/CheckpointDone), after it has begun (IPC/CheckpointStart,
	// a moment): the first is most of its other-wait box.
	line := ""
	for l := range strings.Lines(log) {
		if strings.HasSuffix(l, " : CHECKPOINT\n") {
			line = strings.TrimSpace(l)
		}
	}
	t.Logf("the CHECKPOINT's line: %s", line)
	if !regexp.MustCompile(`, other wait \S+ \(IPC/CheckpointDone\)\)`).MatchString(line) {
		t.Errorf("the CHECKPOINT's line does not name its other wait IPC/CheckpointDone: %q\n%s", line, log)
	}

	// Every quantile is at most the largest value, so at most the total;
	// a histogram of one value has that value as its mean and quantiles.
	// pg_sleep's is one sleep (its latch wait runs to its timeout unless
	// the backend is signalled, which nothing here does).
	ones := 0
	for _, m := range waitHistLine.FindAllStringSubmatch(hists, -1) {
		t.Logf("%s", m[0])
		count, _ := strconv.Atoi(m[2])
		total, mean, p50, p99 := duration(t, m[3]), duration(t, m[4]), duration(t, m[5]), duration(t, m[6])
		if p50 > p99 || p99 > total || mean > total {
			t.Errorf("%s: quantiles beyond the total", m[0])
		}
		if count == 1 {
			ones++
			if p50 != mean || p99 != mean {
				t.Errorf("%s: one sleep, yet its quantiles are not its value", m[0])
			}
		}
	}
	if !strings.Contains(hists, "wait event Timeout/PgSleep: count 1,") || ones == 0 {
		t.Errorf("no wait histogram of one sleep (pg_sleep's):\n%s", hists)
	}
}

// pg_stat_statements' LWLock, contended: backends that store statements
// it has not seen take it exclusively, backends reading its view hold it
// shared. Its waits are named as pg_stat_activity names them
// (LWLock/pg_stat_statements), not by the tranche's number, which is
// the first after the built-in ones.
func TestExtensionTrancheNamed(t *testing.T) {
	sideBySide(t)
	// Every sandbox preloads pg_stat_statements (and creates it): it keeps
	// the fewest entries it may here.
	c := startPG(t, map[string]string{"pg_stat_statements.max": "100"})
	// Statements of new shapes (a select list of any length up to 400)
	// each want a new entry, evicting others from the 100 kept.
	store := filepath.Join(c.SocketDir(), "store.sql")
	read := filepath.Join(c.SocketDir(), "read.sql")
	for file, sql := range map[string]string{
		store: "DO $$ BEGIN FOR i IN 1..50 LOOP EXECUTE 'SELECT ' || repeat('1,', (random() * 400)::int) || '1'; END LOOP; END $$;\n",
		read:  "SELECT count(*) FROM pg_stat_statements;\n",
	} {
		if err := os.WriteFile(file, []byte(sql), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pid := fmt.Sprint(c.PostmasterPID())
	hist := startTrace(t, "hist", "--pid", pid)
	slow := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", pid)
	if _, err := c.Pgbench(context.Background(), "postgres", "-n", "-c", "4", "-T", "5", "-f", store, "-f", read); err != nil {
		t.Fatal(err)
	}
	out := hist.stopText(t)
	qs, _, _ := slow.stop(t)
	// Both name the waits: the histograms (kept by version and event) and
	// each query's. A 5 s run here sleeps on the lock a thousand times or
	// more (1,600 in one): at least one is no matter of luck.
	for _, m := range waitHistLine.FindAllStringSubmatch(out, -1) {
		if strings.HasPrefix(m[1], "LWLock/") {
			t.Logf("%s", m[0])
		}
	}
	if strings.Contains(out, "LWLock/extension") {
		t.Errorf("an extension's LWLock is not named:\n%s", out)
	}
	if !strings.Contains(out, "wait event LWLock/pg_stat_statements: count ") {
		t.Errorf("no sleeps on pg_stat_statements' LWLock:\n%s", out)
	}
	named := 0
	for _, q := range qs {
		for name := range q.Waits {
			if strings.HasPrefix(name, "LWLock/extension") {
				t.Errorf("a query's waits %v do not name an extension's LWLock", q.Waits)
			}
			if name == "LWLock/pg_stat_statements" {
				named++
			}
		}
	}
	t.Logf("%d of %d queries slept on LWLock/pg_stat_statements", named, len(qs))
	if named == 0 {
		t.Error("no query's waits name LWLock/pg_stat_statements")
	}
}

// duration reads a duration as the outputs write it ("91.1ms", "500us").
func duration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return d
}
