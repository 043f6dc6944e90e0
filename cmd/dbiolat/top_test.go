package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/mysandbox"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/sqlnorm"
	"github.com/dbiolat/dbiolat/internal/testenv"
	"github.com/dbiolat/dbiolat/internal/top"
)

// pgbenchSelect is pgbench's select-only query, normalized.
const pgbenchSelect = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"

// slowLineRe is the start of a slow-log line: time, pid, session, its
// application (pgbench names itself), query time, its CPU.
var slowLineRe = regexp.MustCompile(`\d\d:\d\d:\d\d\.\d{3} pid \d+ \S+ (app=\S+ )?query \S+ \(cpu `)

// selectLoad starts a PostgreSQL running pgbench's select-only load (two
// clients) for up to seconds, stopped with the test.
func selectLoad(t *testing.T, seconds int) *pgsandbox.Cluster {
	t.Helper()
	c := startPG(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Pgbench(ctx, "postgres", "-n", "-S", "-c", "2", "-T", strconv.Itoa(seconds))
		done <- err
	}()
	t.Cleanup(func() { // before the server stops (cleanups run last first)
		select {
		case err := <-done: // ended by itself: it must have run
			if err != nil {
				t.Errorf("pgbench: %v", err)
			}
		default:
			cancel()
			<-done
		}
	})
	return c
}

// tmuxPane is a command running in a terminal of its own: a detached tmux
// session on a tmux server of the test's own.
type tmuxPane struct{ socket, name string }

// startTmux runs a shell command in a 160x50 terminal; the pane stays
// once it exits, so that what it left on the terminal can be read.
func startTmux(t *testing.T, command string) *tmuxPane {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "true" {
			t.Skip("tmux is not installed (scripts/install-deps installs it)")
		}
		t.Fatal("tmux is not installed (scripts/install-deps installs it)")
	}
	p := &tmuxPane{socket: filepath.Join(t.TempDir(), "tmux"), name: "top"} // removed with the test
	t.Cleanup(func() { exec.Command("tmux", "-S", p.socket, "kill-server").Run() })
	p.run(t, "-f", "/dev/null", "new-session", "-d", "-s", p.name, "-x", "160", "-y", "50", command,
		";", "set-option", "-t", p.name, "remain-on-exit", "on")
	return p
}

func (p *tmuxPane) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", p.socket}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// screen is what the terminal shows.
func (p *tmuxPane) screen(t *testing.T) string {
	t.Helper()
	return p.run(t, "capture-pane", "-p", "-t", p.name)
}

// keys types keys: tmux's key names ("Down", "Enter"), or with "-l" first, characters.
func (p *tmuxPane) keys(t *testing.T, keys ...string) {
	t.Helper()
	p.run(t, append([]string{"send-keys", "-t", p.name}, keys...)...)
}

// fingerprintRows are the rows of top's first table (after the first
// header with column, up to a blank line), and where that column ends:
// its values are aligned to the right under its name.
func fingerprintRows(screen, column string) (rows []string, end int) {
	lines := strings.Split(screen, "\n")
	for i, l := range lines {
		at := strings.Index(l, column)
		if at < 0 {
			continue
		}
		for _, r := range lines[i+1:] {
			if strings.TrimSpace(r) == "" {
				break
			}
			rows = append(rows, r)
		}
		return rows, at + len(column)
	}
	return nil, 0
}

// columnValue reads the number in a column of the fingerprints' row whose
// text contains text.
func columnValue(screen, column, text string) (float64, bool) {
	rows, end := fingerprintRows(screen, column)
	for _, r := range rows {
		if strings.Contains(r, text) && len(r) >= end {
			f := strings.Fields(r[:end])
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// top in a terminal: pgbench's query among the fingerprints with its
// rate, the sort column moved and turned by the keys and marked in the
// header, the query's slow-log lines on Enter, and on q an exit that
// leaves the terminal as it was (out of the alternate screen, cooked mode,
// echo on).
func TestTopScreen(t *testing.T) {
	sideBySide(t)
	testenv.NeedRoot(t)
	c := selectLoad(t, 20)
	p := startTmux(t, fmt.Sprintf(`%s top --pid %d; echo "dbiolat exited $?"; stty -a; echo "stty said"`, binary, c.PostmasterPID()))
	var screen string
	waitFor(t, "top to show pgbench's query at a rate", func() bool {
		screen = p.screen(t)
		rate, ok := columnValue(screen, "CALLS/S", pgbenchSelect)
		return ok && rate > 0
	})
	t.Logf("the screen:\n%s", screen)
	if !strings.Contains(screen, "vTOTAL") {
		t.Errorf("the header does not mark the sort by total:\n%s", screen)
	}
	p.keys(t, "-l", ">")
	waitFor(t, "the sort to move to the mean", func() bool {
		screen = p.screen(t)
		return strings.Contains(screen, "vMEAN") && !strings.Contains(screen, "vTOTAL")
	})
	p.keys(t, "-l", "r")
	waitFor(t, "the sort to turn", func() bool { screen = p.screen(t); return strings.Contains(screen, "^MEAN") })
	// Back to total, frozen so that rows stay put: select pgbench's row.
	p.keys(t, "-l", "r<f")
	waitFor(t, "the display to freeze", func() bool {
		screen = p.screen(t)
		return strings.Contains(screen, "vTOTAL") && strings.Contains(screen, "FROZEN")
	})
	rows, _ := fingerprintRows(screen, "CALLS/S")
	row := -1
	for i, r := range rows {
		if strings.Contains(r, pgbenchSelect) {
			row = i
			break
		}
	}
	if row < 0 {
		t.Fatalf("pgbench's query is not among the fingerprints:\n%s", screen)
	}
	for range row {
		p.keys(t, "Down")
	}
	p.keys(t, "Enter")
	waitFor(t, "pgbench's slow-log lines", func() bool {
		screen = p.screen(t)
		return strings.Contains(screen, "newest first") && slowLineRe.MatchString(screen) && strings.Contains(screen, pgbenchSelect)
	})
	p.keys(t, "-l", "q")
	waitFor(t, "top to exit", func() bool { screen = p.screen(t); return strings.Contains(screen, "stty said") })
	screen = p.run(t, "capture-pane", "-p", "-S", "-", "-t", p.name) // with what scrolled off
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`CALLS/S`),                 // still on the alternate screen
		regexp.MustCompile(`(?m)(^|\s)-icanon(\s|$)`), // raw mode left on
		regexp.MustCompile(`(?m)(^|\s)-echo(\s|$)`),
		regexp.MustCompile(`panic|goroutine|dbiolat top: `),
	} {
		if bad.MatchString(screen) {
			t.Errorf("after q the terminal shows %q:\n%s", bad, screen)
		}
	}
	for _, want := range []string{"Tracing PostgreSQL pid", "traced ", "dbiolat exited 0", "icanon"} {
		if !strings.Contains(screen, want) {
			t.Errorf("after q the terminal lacks %q:\n%s", want, screen)
		}
	}
}

// Not on a terminal, top prints its intervals as plain text (120
// columns, no escape codes), or as JSON objects of type "top".
func TestTopPlainAndJSON(t *testing.T) {
	sideBySide(t)
	c := selectLoad(t, 20)
	pid := fmt.Sprint(c.PostmasterPID())
	run := func(args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, binary, append([]string{"top", "--pid", pid}, args...)...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr // pipes, not a terminal
		if err := cmd.Run(); err != nil {
			t.Fatalf("dbiolat top %v: %v: %s", args, err, stderr.String())
		}
		return stdout.String()
	}

	out := run("--count", "3")
	if strings.IndexByte(out, 0x1b) >= 0 {
		t.Errorf("escape codes in the plain output:\n%q", out)
	}
	if n := strings.Count(out, "dbiolat top: PostgreSQL pid "+pid); n != 3 {
		t.Errorf("%d intervals, want 3:\n%s", n, out)
	}
	if rate, ok := columnValue(out[strings.LastIndex(out, "dbiolat top: "):], "CALLS/S", pgbenchSelect); !ok || rate <= 0 {
		t.Errorf("the last interval lacks pgbench's query at a rate:\n%s", out)
	}
	end := strings.LastIndex(out, "\ntraced ") // the closing summary, a line of its own
	if end < 0 {
		t.Fatalf("no summary:\n%s", out)
	}
	for _, l := range strings.Split(out[:end], "\n") {
		if len([]rune(l)) > plainWidth {
			t.Errorf("a line of %d characters: %q", len([]rune(l)), l)
		}
	}

	out = run("--json", "--count", "2")
	frames, summaries := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var f top.Frame
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		switch f.Type {
		case "top":
			frames++
			if frames < 2 {
				continue
			}
			var calls uint64
			for _, r := range f.Fingerprints {
				if strings.HasPrefix(r.Query, pgbenchSelect) {
					calls = r.Calls
				}
			}
			if calls == 0 || len(f.Backends) == 0 || f.Seconds <= 0 {
				t.Errorf("the second interval: %d calls of pgbench's query, %d backends, %.2fs: %s", calls, len(f.Backends), f.Seconds, line)
			}
			// pgbench's backends live through the interval: their rows
			// hold the time of the queries they ended, as the fingerprint's
			// does (the two read a moment apart, a busy machine's moment
			// at most a quarter of the interval).
			var fpNs, backendNs uint64
			for _, r := range f.Fingerprints {
				fpNs += r.TotalNs
			}
			for _, r := range f.Backends {
				backendNs += r.TotalNs
			}
			if d := math.Abs(float64(backendNs) - float64(fpNs)); fpNs == 0 || d > 0.25*float64(fpNs) {
				t.Errorf("the second interval: the backends' rows hold %v of query time, the fingerprints' %v", time.Duration(backendNs), time.Duration(fpNs))
			}
		case "summary":
			summaries++
		default:
			t.Errorf("an object of type %q: %s", f.Type, line)
		}
	}
	if frames != 2 || summaries != 1 {
		t.Errorf("%d objects of type top and %d summaries, want 2 and 1:\n%s", frames, summaries, out)
	}
}

// top counts as the kernel counts: PostgreSQL's queries under their
// statement identity, without a record each. Over pgbench (TPC-B-like on
// the simple protocol, select-only on the extended one) and real drivers
// (psycopg's executemany, server-side cursor and multi-statement Query;
// pgJDBC's prepared statements, batch and fetch size; libpq's pipeline
// mode, driven by pgbench), the calls top's fingerprint rows add up to
// over its intervals are pg_stat_statements' calls: per query id for
// pgbench's statements, per driver case by the table its statements name
// (a pipeline's statements come as records Go counts, the others the
// kernel counts). The backends' rows are the kernel's too (no time per
// backend); no identity goes unnamed and nothing is lost.
func TestTopCountsAsPgStatStatements(t *testing.T) {
	sideBySide(t)
	python, jars := driverTools(t)
	port := freePort(t)
	c := startPG(t, map[string]string{"listen_addresses": "127.0.0.1", "port": strconv.Itoa(port)})
	ctx := context.Background()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	cases := []driverCase{
		{"psycopg", "executemany", regexp.MustCompile(`drv_executemany\b`)},
		{"psycopg", "cursor", regexp.MustCompile(`drv_(cursor|named)\b`)},
		{"psycopg", "multi", regexp.MustCompile(`drv_multi\b`)},
		{"pgjdbc", "prepared", regexp.MustCompile(`drv_prepared\b`)},
		{"pgjdbc", "batch", regexp.MustCompile(`drv_batch\b`)},
		{"pgjdbc", "fetch", regexp.MustCompile(`drv_fetch\b`)},
		{"libpq", "pipeline", regexp.MustCompile(`drv_libpq\b`)},
	}
	script := filepath.Join(reachableTempDir(t, "top-pipeline-"), "pipeline.sql")
	body := "\\startpipeline\n" + strings.Repeat("INSERT INTO drv_libpq VALUES (:client_id, 'x');\n", 10) + "\\endpipeline\n"
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}

	tr := startTrace(t, "top", "--json", "--interval", "1s", "--pid", fmt.Sprint(c.PostmasterPID()))
	before, _ := statementCalls(t, c)
	psql(t, c, "CREATE TABLE drv_libpq (id int, v text)") // counted by both
	done := make(chan error, 3)
	for _, args := range [][]string{
		{"-n", "-c", "1", "-M", "simple", "-t", "300"},
		{"-n", "-S", "-c", "2", "-M", "extended", "-t", "3000"},
	} {
		go func() { _, err := c.Pgbench(ctx, "postgres", args...); done <- err }()
	}
	// A backend that lives through several intervals while its queries
	// end: the backends' rows hold query time however fast pgbench's
	// short-lived ones run.
	go func() { _, err := c.Psql(ctx, "postgres", strings.Repeat("SELECT pg_sleep(0.1);\n", 30)); done <- err }()
	for _, dc := range cases {
		runDriver(t, c, dc, python, jars, port, func(ctx context.Context) *exec.Cmd {
			return c.PgbenchCmd(ctx, "postgres", "-n", "-M", "extended", "-f", script, "-t", "30")
		})
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// An identity's counts wait for the record that names it (read with
	// them, normally; asked again if lost): a few intervals more.
	time.Sleep(4 * time.Second)
	after, _ := statementCalls(t, c)
	time.Sleep(1500 * time.Millisecond) // the interval that reads the test's own query
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("dbiolat top exited with %v: %s", err, tr.stderr.String())
	}

	byFP, byCase := map[string]uint64{}, map[string]uint64{}
	var frames, counted int
	var fpNs, backendNs uint64
	var last top.Frame
	for _, line := range strings.Split(strings.TrimSpace(tr.stdout.String()), "\n") {
		var f top.Frame
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		if f.Type != "top" {
			continue
		}
		frames++
		last = f
		for _, r := range f.Fingerprints {
			fpNs += r.TotalNs
			if r.Fingerprint == model.UnnamedFingerprint || r.Fingerprint == model.OtherFingerprint {
				t.Errorf("%d calls counted as %q", r.Calls, r.Fingerprint)
			}
			matched := false
			for _, dc := range cases {
				if dc.marker.MatchString(r.Query) {
					byCase[dc.driver+" "+dc.name] += r.Calls
					matched = true
				}
			}
			if !matched {
				byFP[r.Fingerprint] += r.Calls
			}
		}
		for _, r := range f.Backends {
			// (Its calls are the queries its live threads began, its time
			// that of those they ended: a backend that exited before the
			// interval's end shows its I/O only.)
			backendNs += r.TotalNs
			if r.KernelCounted {
				counted++
				if r.Role != "client backend" {
					t.Errorf("a backend the kernel counted in the role %q: %+v", r.Role, r)
				}
			}
		}
	}
	if frames < 3 || counted == 0 {
		t.Fatalf("%d intervals, %d backend rows the kernel counted:\n%s", frames, counted, tr.stdout.String())
	}
	// Every query's time is its fingerprint's and its backend's: the
	// backends' add up to the fingerprints' but for the last interval of
	// those that exited before it was read (the drivers' short sessions).
	t.Logf("query time: fingerprints %v, backends %v", time.Duration(fpNs), time.Duration(backendNs))
	if backendNs == 0 || backendNs > fpNs {
		t.Errorf("the backends' rows hold %dns of query time, the fingerprints' %dns", backendNs, fpNs)
	}
	for _, c := range model.Counters {
		if c.Loss && last.Drops[c.Name] > 0 {
			t.Errorf("%s: %d", c.Name, last.Drops[c.Name])
		}
	}

	// pgbench's statements, by their fingerprint: top's rows are
	// fingerprints, and PostgreSQL gives a statement sent with literals
	// (the simple protocol) another query id than the same sent with
	// parameters (the extended one), so that pgbench's SELECT has two.
	theirsByFP, texts := map[string]uint64{}, map[string]string{}
	for _, line := range strings.Split(psql(t, c, "SELECT queryid, query FROM pg_stat_statements WHERE query LIKE '%pgbench\\_%' AND query NOT LIKE '%drv\\_%'"), "\n") {
		id, query, _ := strings.Cut(line, "|")
		if n := after[id] - before[id]; n > 0 {
			norm, fp := sqlnorm.Of(query)
			theirsByFP[fmt.Sprintf("%016x", fp)] += uint64(n)
			texts[fmt.Sprintf("%016x", fp)] = norm
		}
	}
	if len(theirsByFP) < 6 {
		t.Errorf("pg_stat_statements counted %d of pgbench's statements, want its 4 of TPC-B-like, its SELECT and its count", len(theirsByFP))
	}
	for _, fp := range slices.Sorted(maps.Keys(theirsByFP)) {
		t.Logf("pg_stat_statements %5d, top %5d: %s", theirsByFP[fp], byFP[fp], texts[fp])
		if byFP[fp] != theirsByFP[fp] {
			t.Errorf("top counted %d, pg_stat_statements %d: %s", byFP[fp], theirsByFP[fp], texts[fp])
		}
	}
	// Each driver case's statements, by the tables they name.
	theirs := map[string]uint64{}
	for _, line := range strings.Split(psql(t, c, "SELECT calls, query FROM pg_stat_statements WHERE query LIKE '%drv\\_%'"), "\n") {
		calls, query, _ := strings.Cut(line, "|")
		n, _ := strconv.ParseUint(calls, 10, 64)
		for _, dc := range cases {
			if dc.marker.MatchString(query) {
				theirs[dc.driver+" "+dc.name] += n
			}
		}
	}
	for _, dc := range cases {
		k := dc.driver + " " + dc.name
		t.Logf("%-20s pg_stat_statements %4d, top %4d", k, theirs[k], byCase[k])
		if theirs[k] == 0 || byCase[k] != theirs[k] {
			t.Errorf("%s: top counted %d statements, pg_stat_statements %d", k, byCase[k], theirs[k])
		}
	}
}

// The kernel counts a statement under the application its backend has
// when the statement ends: the name's hash is kept with the string it was
// read from (stmt_application), PostgreSQL gives the variable a new
// string at each change, and the variable is read only after a reply that
// may have reported a change (reply_quiet). One connection changes its
// application_name by its startup packet, SET, set_config(), two SETs in
// one multi-statement Query (the second string may take the place the
// name before last had), SET LOCAL undone by its transaction's COMMIT, and
// RESET; top's rows of one statement hold each application's calls as
// they ran.
func TestTopCountsByApplication(t *testing.T) {
	sideBySide(t)
	c := startPG(t, nil)
	const probe = "SELECT 1 AS app_probe;\n"
	steps := []struct {
		set, app string
		n        int
	}{
		{"", "app-start", 5},
		{"SET application_name = 'app-one';", "app-one", 30},
		{"SET application_name = 'app-two';", "app-two", 20},
		{"SELECT set_config('application_name', 'app-three', false);", "app-three", 10},
		{"SET application_name = 'app-tmp' \\; SET application_name = 'app-four';", "app-four", 7},
		{"BEGIN;\nSET LOCAL application_name = 'app-local';", "app-local", 4},
		{"COMMIT;", "app-four", 6},
		{"RESET application_name;", "app-start", 3},
	}
	var script strings.Builder
	want := map[string]uint64{}
	for _, st := range steps {
		script.WriteString(st.set + "\n" + strings.Repeat(probe, st.n))
		want[st.app] += uint64(st.n)
	}
	// A top for each application (--application): its fingerprint rows
	// are the queries of that application only.
	tops := map[string]*trace{}
	for app := range want {
		tops[app] = startTrace(t, "top", "--json", "--interval", "1s", "--application", app, "--pid", fmt.Sprint(c.PostmasterPID()))
	}
	cmd := c.PsqlCmd(context.Background(), "postgres", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-")
	cmd.Env = append(cmd.Env, "PGAPPNAME=app-start")
	cmd.Stdin = strings.NewReader(script.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("psql: %v: %s", err, out)
	}
	time.Sleep(2500 * time.Millisecond) // the intervals that read them, and their names
	got := map[string]uint64{}
	for app, tr := range tops {
		tr.cmd.Process.Signal(syscall.SIGINT)
		if err := tr.cmd.Wait(); err != nil {
			t.Fatalf("dbiolat top exited with %v: %s", err, tr.stderr.String())
		}
		for _, line := range strings.Split(strings.TrimSpace(tr.stdout.String()), "\n") {
			var f top.Frame
			if err := json.Unmarshal([]byte(line), &f); err != nil {
				t.Fatalf("%v: %q", err, line)
			}
			for _, r := range f.Fingerprints {
				if strings.Contains(r.Query, "app_probe") {
					got[app] += r.Calls
				}
			}
		}
	}
	t.Logf("calls by application: ran %v, top %v", want, got)
	if !maps.Equal(got, want) {
		t.Errorf("top counted %v by application, the connection ran %v", got, want)
	}
}

// top on MariaDB (sysbench's oltp_read_write, its statements prepared and
// not): MySQL's queries are counted in the kernel by statement (their text
// without literals, or their prepared statement in its connection); the
// calls of top's fingerprint rows are the server's own counters
// (Com_select...) by kind. Its connections have no rows of their own (a
// MySQL server's units are threads): any listed holds a record's time.
func TestTopMariaDB(t *testing.T) {
	sideBySide(t)
	s := startMariaDB(t, nil)
	ctx := mysqlContext(t)
	o := mysandbox.SysbenchOptions{Test: "oltp_read_write", Tables: 2, TableSize: 2000, Threads: 4, Events: 200}
	if _, err := s.Sysbench(ctx, o, "prepare"); err != nil {
		t.Fatal(err)
	}
	before := comCounters(t, s)
	tr := startTrace(t, "top", "--json", "--interval", "1s", "--pid", fmt.Sprint(s.PID()))
	for _, mode := range []string{"auto", "disable"} {
		o.PSMode = mode
		if _, err := s.Sysbench(ctx, o, "run"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // the interval that holds the last of them
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("dbiolat top exited with %v: %s", err, tr.stderr.String())
	}
	after := comCounters(t, s)

	ours := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(tr.stdout.String()), "\n") {
		var f top.Frame
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		for _, r := range f.Fingerprints {
			first, _, _ := strings.Cut(strings.TrimSpace(r.Query), " ")
			ours[strings.ToUpper(first)] += r.Calls
		}
		for _, r := range f.Backends {
			if r.ConnectionID != 0 && r.Calls > 0 && (r.KernelCounted || r.TotalNs == 0) {
				t.Errorf("connection %d: %d calls, %dns, kernel_counted %v: a MySQL connection's row is its records'", r.ConnectionID, r.Calls, r.TotalNs, r.KernelCounted)
			}
		}
	}
	for kind, counter := range sysbenchKinds {
		theirs := after[counter] - before[counter]
		t.Logf("%-6s %s %5d, top %5d", kind, counter, theirs, ours[kind])
		if theirs == 0 || ours[kind] != theirs {
			t.Errorf("%s: top counted %d, the server's %s %d", kind, ours[kind], counter, theirs)
		}
	}
}
