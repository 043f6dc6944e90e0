package record

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
)

func sampleQuery(i int) *model.Query {
	return &model.Query{Type: "query", Statements: 1, TS: time.Unix(1700000000, int64(i)), PID: 42, Role: "client backend",
		Fingerprint: "00000000000000aa", Query: "SELECT $1", QueryNs: uint64(1000 + i), CPUNs: 900,
		FSTotals: model.FSTotals{FSReadCount: 2, FSReadNs: 50}}
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.dbiolat")
	w, err := Create(path, map[string]string{"kernel": "6.18"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		w.Query(sampleQuery(i))
	}
	w.Process(&model.Process{Type: "process", Role: "autovacuum worker", PID: 7, ElapsedNs: 5})
	w.Interval(&model.Interval{Type: "interval", Seconds: 1, Rates: []model.Rate{{Layer: "fs", Role: "checkpointer", WriteOps: 3}}})
	w.Summary(&model.Summary{Type: "summary", Queries: 100})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// SQLite's side files hold query texts too while the recording is open.
	for _, side := range []string{"-wal", "-shm"} {
		if st, err := os.Stat(path + side); err != nil {
			t.Error(err)
		} else if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", side, st.Mode().Perm())
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("recording mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	qs := slices.Collect(r.Queries)
	if len(qs) != 100 || qs[99].QueryNs != 1099 || qs[0].FSReadCount != 2 || r.Err() != nil {
		t.Errorf("queries read back: %d, last %+v, %v", len(qs), qs[len(qs)-1], r.Err())
	}
	if len(r.Processes) != 1 || r.Processes[0].Role != "autovacuum worker" || len(r.Intervals) != 1 || r.Intervals[0].Rates[0].WriteOps != 3 {
		t.Errorf("processes %+v, intervals %+v", r.Processes, r.Intervals)
	}
	if r.Summary == nil || r.Summary.Queries != 100 || r.Meta["kernel"] != "6.18" || r.Meta["version"] != Version {
		t.Errorf("summary %+v, meta %v", r.Summary, r.Meta)
	}
	if _, err := Create(path, nil); err == nil {
		t.Error("Create overwrote an existing recording")
	}
}

// Each query's application and query id are columns too (users' own
// tools query and join by them: the query id as pg_stat_statements shows
// it, a signed 64-bit integer kept exactly); a recording made before
// those columns still reads, its queries naming neither.
func TestApplicationColumn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apps.dbiolat")
	w, err := Create(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := sampleQuery(1)
	q.Application = "psql"
	q.QueryID = -8_716_437_223_111_042_003 // past 2^53: a float would round it
	w.Query(q)
	w.Query(sampleQuery(2))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var apps string
	if err := db.QueryRow("SELECT group_concat(application, ',') FROM queries").Scan(&apps); err != nil || apps != "psql," {
		t.Errorf("the application column holds %q (%v), want \"psql,\"", apps, err)
	}
	var ids string
	if err := db.QueryRow("SELECT group_concat(queryid, ',') FROM queries").Scan(&ids); err != nil || ids != "-8716437223111042003,0" {
		t.Errorf("the queryid column holds %q (%v), want \"-8716437223111042003,0\"", ids, err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if qs := slices.Collect(r.Queries); len(qs) != 2 || qs[0].Application != "psql" || qs[1].Application != "" ||
		qs[0].QueryID != q.QueryID || qs[1].QueryID != 0 {
		t.Errorf("read back: %+v", qs)
	}

	// A recording of the schema before the column, as an older dbiolat wrote it.
	old := filepath.Join(t.TempDir(), "old.dbiolat")
	odb, err := sql.Open("sqlite", "file:"+old)
	if err != nil {
		t.Fatal(err)
	}
	defer odb.Close()
	for _, stmt := range []string{
		"CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
		"INSERT INTO meta VALUES ('format', 'dbiolat'), ('version', '1')",
		"CREATE TABLE queries (ts INTEGER NOT NULL, fingerprint TEXT NOT NULL, query_ns INTEGER NOT NULL, record TEXT NOT NULL)",
		`INSERT INTO queries VALUES (1, 'aa', 5, '{"type":"query","fingerprint":"aa","query":"SELECT 1","query_ns":5,"statements":1}')`,
		"CREATE TABLE processes (ts INTEGER NOT NULL, record TEXT NOT NULL)",
		"CREATE TABLE intervals (ts INTEGER NOT NULL, record TEXT NOT NULL)",
		"CREATE TABLE summaries (ts INTEGER NOT NULL, record TEXT NOT NULL)",
		"CREATE TABLE fio (ts INTEGER NOT NULL, record TEXT NOT NULL)",
	} {
		if _, err := odb.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	r, err = Open(old)
	if err != nil {
		t.Fatal(err)
	}
	if qs := slices.Collect(r.Queries); len(qs) != 1 || qs[0].Application != "" || qs[0].QueryID != 0 || qs[0].QueryNs != 5 || r.Err() != nil {
		t.Errorf("an older recording read back: %+v, %v", qs, r.Err())
	}
}

// A writer killed with SIGKILL leaves a recording that opens and holds
// what was flushed.
func TestKilledRecordingOpens(t *testing.T) {
	if os.Getenv("RECORD_KILL_CHILD") != "" {
		w, err := Create(os.Getenv("RECORD_KILL_CHILD"), nil)
		if err != nil {
			os.Exit(3)
		}
		for i := 0; ; i++ {
			w.Query(sampleQuery(i))
			if i%100 == 99 {
				w.Flush()
			}
		}
	}
	path := filepath.Join(t.TempDir(), "killed.dbiolat")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestKilledRecordingOpens$")
	cmd.Env = append(os.Environ(), "RECORD_KILL_CHILD="+path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	n := len(slices.Collect(r.Queries))
	if n == 0 || r.Summary != nil || r.Err() != nil {
		t.Errorf("after SIGKILL: %d queries, summary %v, %v; want the flushed queries and no summary", n, r.Summary, r.Err())
	}
	t.Logf("recovered %d queries after SIGKILL", n)
}

func TestBadFilesGiveOneSentence(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.dbiolat")
	w, err := Create(good, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ {
		w.Query(sampleQuery(i))
	}
	w.Close()
	data, _ := os.ReadFile(good)

	text := filepath.Join(dir, "text")
	os.WriteFile(text, []byte("hello, not a database\n"), 0o600)
	truncated := filepath.Join(dir, "truncated")
	os.WriteFile(truncated, data[:len(data)/3], 0o600)
	garbled := filepath.Join(dir, "garbled")
	g := append([]byte(nil), data...)
	for i := 100; i < len(g); i += 7 {
		g[i] ^= 0x5a
	}
	os.WriteFile(garbled, g, 0o600)
	for name, path := range map[string]string{"missing": filepath.Join(dir, "nope"), "text": text, "truncated": truncated, "garbled": garbled} {
		_, err := Open(path)
		if err == nil {
			t.Errorf("%s: opened without error", name)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, path) {
			t.Errorf("%s: %q is not one sentence naming the file", name, msg)
		}
	}
}

// The reader on damaged recordings: an error that names the file, or a
// recording, never a panic or a hang.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "seed.dbiolat")
	w, err := Create(path, nil)
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		w.Query(sampleQuery(i))
	}
	w.Summary(&model.Summary{Type: "summary", Queries: 3})
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte("SQLite format 3\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "fuzzed.dbiolat")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("the error does not name the file: %v", err)
			}
			return
		}
		if r.Meta["format"] != "dbiolat" {
			t.Fatalf("opened without the format mark: %v", r.Meta)
		}
		for range r.Queries {
		}
		if err := r.Err(); err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("the error does not name the file: %v", err)
		}
	})
}
