// Package record writes and reads recordings: everything a trace saw, in
// one SQLite file, written incrementally so that an interrupted recording
// keeps what it had. Records are stored as the JSON of their model type
// (one definition: internal/model), beside the columns reports query by.
package record

import (
	"cmp"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"time"

	_ "modernc.org/sqlite" // pure Go: the binary stays static

	"github.com/dbiolat/dbiolat/internal/model"
)

// Version is the recording format's version, stored in meta. Columns
// added since (queries.application, queries.queryid) come last, with a default, and reads
// use only the records: a recording without them reads as before.
const Version = "1"

const schema = `
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE queries (ts INTEGER NOT NULL, fingerprint TEXT NOT NULL, query_ns INTEGER NOT NULL, record TEXT NOT NULL,
	application TEXT NOT NULL DEFAULT '', queryid INTEGER NOT NULL DEFAULT 0);
CREATE TABLE processes (ts INTEGER NOT NULL, record TEXT NOT NULL);
CREATE TABLE intervals (ts INTEGER NOT NULL, record TEXT NOT NULL);
CREATE TABLE summaries (ts INTEGER NOT NULL, record TEXT NOT NULL);
CREATE TABLE fio (ts INTEGER NOT NULL, record TEXT NOT NULL);
CREATE INDEX queries_fingerprint ON queries (fingerprint);
`

// Writer appends to a new recording. Records are buffered and written in
// one transaction per Flush; the trace loop flushes after every drain.
type Writer struct {
	db      *sql.DB
	path    string
	pending []func(*sql.Tx) error
	err     error // the first failed write: later ones are not tried
}

// Create makes a new recording at path (mode 0600: query texts are
// private) with the given environment facts in meta.
func Create(path string, env map[string]string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot create the recording %s: %w", path, err)
	}
	f.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("initializing the recording %s: %w", path, err)
	}
	w := &Writer{db: db, path: path}
	// model.RunqEngineMeta: its query records carry runq_engine_ns, measured.
	meta := map[string]string{"format": "dbiolat", "version": Version, "started": time.Now().UTC().Format(time.RFC3339Nano),
		model.RunqEngineMeta: "measured"}
	for k, v := range env {
		meta[k] = v
	}
	w.Meta(meta)
	return w, w.Flush()
}

func insert(q string, args ...any) func(*sql.Tx) error {
	return func(tx *sql.Tx) error { _, err := tx.Exec(q, args...); return err }
}

func encode(v any) string {
	b, _ := json.Marshal(v) // model types always marshal
	return string(b)
}

// maxPending bounds the records held between flushes: a busy database
// can send tens of thousands of queries a second.
const maxPending = 4096

// Query adds a query record; it writes what is pending when that is a lot.
func (w *Writer) Query(q *model.Query) error {
	w.pending = append(w.pending, insert("INSERT INTO queries (ts, fingerprint, query_ns, record, application, queryid) VALUES (?, ?, ?, ?, ?, ?)",
		q.TS.UnixNano(), q.Fingerprint, q.QueryNs, encode(q), q.Application, q.QueryID))
	if len(w.pending) >= maxPending {
		return w.Flush()
	}
	return nil
}

// Process adds a process run.
func (w *Writer) Process(p *model.Process) {
	w.pending = append(w.pending, insert("INSERT INTO processes VALUES (?, ?)", p.TS.UnixNano(), encode(p)))
}

// Interval adds an interval.
func (w *Writer) Interval(iv *model.Interval) {
	w.pending = append(w.pending, insert("INSERT INTO intervals VALUES (?, ?)", iv.TS.UnixNano(), encode(iv)))
}

// Summary adds the closing summary.
func (w *Writer) Summary(s *model.Summary) {
	w.pending = append(w.pending, insert("INSERT INTO summaries VALUES (?, ?)", time.Now().UnixNano(), encode(s)))
}

// Meta adds or replaces facts about the recording.
func (w *Writer) Meta(facts map[string]string) {
	for k, v := range facts {
		w.pending = append(w.pending, insert("INSERT OR REPLACE INTO meta VALUES (?, ?)", k, v))
	}
}

// Fio adds a fio reference run (dbiolat bench).
func (w *Writer) Fio(j *model.FioJob) {
	w.pending = append(w.pending, insert("INSERT INTO fio VALUES (?, ?)", time.Now().UnixNano(), encode(j)))
}

// Flush writes what is pending in one transaction. After a failure (a
// full disk) it writes nothing more and returns that failure: what was
// written before stays a readable recording.
func (w *Writer) Flush() error {
	if w.err != nil || len(w.pending) == 0 {
		return w.err
	}
	if err := w.write(); err != nil {
		w.err = fmt.Errorf("writing the recording %s failed, what was written before is kept: %w", w.path, err)
	}
	w.pending = w.pending[:0]
	return w.err
}

func (w *Writer) write() error {
	tx, err := w.db.Begin()
	if err != nil {
		return err
	}
	for _, f := range w.pending {
		if err := f(tx); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

// Close flushes and closes the recording; it returns the first failure.
func (w *Writer) Close() error {
	return cmp.Or(w.Flush(), w.db.Close())
}

// Recording is an opened recording, read-only.
type Recording struct {
	Meta map[string]string
	// Queries yields the query records in time order, read one at a time
	// from the file each time it is ranged over: a long recording holds
	// more of them than memory would. A damaged record ends it, and Err
	// says why.
	Queries   iter.Seq[model.Query]
	Processes []model.Process
	Intervals []model.Interval
	Summary   *model.Summary // nil when the recording was interrupted
	Fio       []model.FioJob // the fio reference runs of a bench
	err       error
}

// Err is why the last range over Queries stopped early, if it did.
func (r *Recording) Err() error { return r.err }

// Open reads a whole recording. A file that is not a dbiolat recording,
// or a damaged one, gives one plain sentence.
func Open(path string) (*Recording, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("cannot open the recording %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	bad := func(err error) error {
		return fmt.Errorf("%s is not a readable dbiolat recording (%v): was it written by dbiolat record, and is it complete?", path, err)
	}
	r := &Recording{Meta: map[string]string{}}
	rows, err := db.Query("SELECT key, value FROM meta")
	if err != nil {
		return nil, bad(err)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return nil, bad(err)
		}
		r.Meta[k] = v
	}
	rows.Close()
	if r.Meta["format"] != "dbiolat" {
		return nil, bad(errors.New("no dbiolat format mark"))
	}
	if r.Meta["version"] != Version {
		return nil, fmt.Errorf("%s is a version %s recording; this dbiolat reads version %s", path, r.Meta["version"], Version)
	}
	for _, t := range []struct {
		table string
		add   func([]byte) error
	}{
		{"processes", func(b []byte) error {
			var p model.Process
			err := json.Unmarshal(b, &p)
			r.Processes = append(r.Processes, p)
			return err
		}},
		{"intervals", func(b []byte) error {
			var iv model.Interval
			err := json.Unmarshal(b, &iv)
			r.Intervals = append(r.Intervals, iv)
			return err
		}},
		{"summaries", func(b []byte) error { r.Summary = &model.Summary{}; return json.Unmarshal(b, r.Summary) }},
		{"fio", func(b []byte) error {
			var j model.FioJob
			err := json.Unmarshal(b, &j)
			r.Fio = append(r.Fio, j)
			return err
		}},
	} {
		rows, err := db.Query("SELECT record FROM " + t.table + " ORDER BY ts")
		if err != nil {
			return nil, bad(err)
		}
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				rows.Close()
				return nil, bad(err)
			}
			if err := t.add(b); err != nil {
				rows.Close()
				return nil, bad(err)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, bad(err)
		}
	}
	// The queries are read when used; that the table is there is checked now.
	if _, err := db.Exec("SELECT 1 FROM queries LIMIT 1"); err != nil {
		return nil, bad(err)
	}
	r.Queries = func(yield func(model.Query) bool) {
		r.err = nil
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
		if err != nil {
			r.err = bad(err)
			return
		}
		defer db.Close()
		rows, err := db.Query("SELECT record FROM queries ORDER BY rowid") // as recorded: no sort to hold in memory
		if err != nil {
			r.err = bad(err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			var b []byte
			q := model.Query{Statements: 1} // a recording made before records counted their statements
			if err := rows.Scan(&b); err != nil {
				r.err = bad(err)
				return
			}
			if err := json.Unmarshal(b, &q); err != nil {
				r.err = bad(err)
				return
			}
			if !yield(q) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			r.err = bad(err)
		}
	}
	return r, nil
}
