package main

// Overload and hostile input from the database side: query texts of
// megabytes, invalid UTF-8 and NUL bytes, and a flood of distinct queries.
// The outputs stay valid JSON and the memory within its budget.

import (
	"bufio"
	"bytes"
	"context"
	be "encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// rawClient is a connection that speaks PostgreSQL's protocol byte by
// byte, to send what no well-behaved driver sends.
type rawClient struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialRaw(t *testing.T, c *pgsandbox.Cluster) *rawClient {
	t.Helper()
	conn, err := net.Dial("unix", filepath.Join(c.SocketDir(), fmt.Sprintf(".s.PGSQL.%d", c.Port())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	user := "postgres"
	for _, kv := range c.Env() {
		if v, ok := strings.CutPrefix(kv, "PGUSER="); ok {
			user = v
		}
	}
	params := "user\x00" + user + "\x00database\x00postgres\x00\x00"
	startup := be.BigEndian.AppendUint32(nil, uint32(8+len(params)))
	startup = be.BigEndian.AppendUint32(startup, 3<<16) // protocol 3.0
	rc := &rawClient{conn: conn, r: bufio.NewReader(conn)}
	if _, err := conn.Write(append(startup, params...)); err != nil {
		t.Fatal(err)
	}
	rc.untilReady(t)
	return rc
}

// query sends one Query message whose body is exactly text (no NUL is
// added) and returns the server's error message, if any.
func (rc *rawClient) query(t *testing.T, text []byte) string {
	t.Helper()
	msg := append([]byte{'Q'}, be.BigEndian.AppendUint32(nil, uint32(4+len(text)))...)
	if _, err := rc.conn.Write(append(msg, text...)); err != nil {
		t.Fatal(err)
	}
	return rc.untilReady(t)
}

// untilReady reads messages up to ReadyForQuery; it returns the text of
// an ErrorResponse among them.
func (rc *rawClient) untilReady(t *testing.T) (errText string) {
	t.Helper()
	rc.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(rc.r, hdr[:]); err != nil {
			t.Fatalf("reading from the server: %v", err)
		}
		body := make([]byte, be.BigEndian.Uint32(hdr[1:])-4)
		if _, err := io.ReadFull(rc.r, body); err != nil {
			t.Fatalf("reading from the server: %v", err)
		}
		switch hdr[0] {
		case 'Z':
			return errText
		case 'E':
			errText = strings.ReplaceAll(string(body), "\x00", " ")
		}
	}
}

// Query texts no normal client sends: megabytes long, invalid UTF-8, NUL
// bytes inside the message. Every record is valid JSON with valid UTF-8,
// the long text is cut and marked so, the literals are gone unless
// --raw-sql, and memory stays in its budget.
func TestHostileQueryTexts(t *testing.T) {
	c := startPG(t, nil)
	pid := fmt.Sprint(c.PostmasterPID())
	normalized := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", pid)
	raw := startTrace(t, "slowlog", "--json", "--min-query", "0", "--raw-sql", "--pid", pid)
	rc := dialRaw(t, c)
	huge := "SELECT length('" + strings.Repeat("secret ", 3<<20/7) + "')\x00"
	sent := []struct {
		text        string
		wantError   bool   // the server refuses it
		rawPrefix   string // what --raw-sql shows first
		normPrefix  string // what the default shows first
		isTruncated bool
	}{
		{huge, false, "SELECT length('secret secret", "SELECT length($1", true},
		{"SELECT 'bad \xff\xfe\x80 bytes', 1\x00", true, "SELECT 'bad \uFFFD", "SELECT $1, $2", false},
		{"SELECT 'before NUL'\x00after \xff NUL\x00", true, "SELECT 'before NUL'", "SELECT $1", false},
		{"SELECT E'\\x01\\n', '\"}{\\', 7 -- \x01\x02\x1b[31m\x00", false, "SELECT E'\\x01\\n', '\"}{\\', 7", "SELECT $1, $2, $3", false},
	}
	for _, s := range sent {
		if e := rc.query(t, []byte(s.text)); (e != "") != s.wantError {
			t.Fatalf("the server answered %q to %.40q", e, s.text)
		}
	}
	for _, tr := range []struct {
		trace  *trace
		rawSQL bool
	}{{normalized, false}, {raw, true}} {
		queries, _, sum := tr.trace.stop(t) // every line parsed as JSON
		if len(queries) != len(sent) {
			t.Errorf("raw-sql %v: %d records for %d round trips", tr.rawSQL, len(queries), len(sent))
			continue
		}
		for i, q := range queries {
			want := sent[i].normPrefix
			if tr.rawSQL {
				want = sent[i].rawPrefix
			}
			if !strings.HasPrefix(q.Query, want) || !utf8.ValidString(q.Query) || strings.ContainsRune(q.Query, 0) {
				t.Errorf("raw-sql %v: record %d is %.80q, want it to begin %q, in valid UTF-8 without NUL", tr.rawSQL, i, q.Query, want)
			}
			if !tr.rawSQL && strings.Contains(q.Query, "secret") {
				t.Errorf("a literal is left in the normalized text %.80q", q.Query)
			}
			if q.Truncated != sent[i].isTruncated || len(q.Query) > 8<<10 {
				t.Errorf("raw-sql %v: record %d: truncated %v, %d bytes", tr.rawSQL, i, q.Truncated, len(q.Query))
			}
		}
		if sum.Cost == nil || sum.Cost.MaxRSSBytes > testenv.MemoryBudget {
			t.Errorf("dbiolat's peak memory %+v, budget %d MiB", sum.Cost, testenv.MemoryBudget>>20)
		}
	}
}

// A flood of distinct statements (100,000 fingerprints, each its own
// text) recorded and reported: every one is counted, and neither the
// recorder nor the report outgrows the memory budget.
func TestDistinctQueryFlood(t *testing.T) {
	c := startPG(t, nil)
	const n = 100000
	file := filepath.Join(t.TempDir(), "flood.dbiolat")
	tr := startTrace(t, "record", "--min-query", "0", "-o", file, "--pid", fmt.Sprint(c.PostmasterPID()))
	// Each statement names a column of its own: a new fingerprint each.
	dir := reachableTempDir(t, "dbiolat-flood-") // pgbench runs as the server's user
	script := filepath.Join(dir, "distinct.sql")
	if err := os.WriteFile(script, []byte("\\set n random(1, 1000000000000)\nSELECT 1 AS c:n;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pgbench(context.Background(), "postgres", "-n", "-f", script, "-c", "2", "-t", fmt.Sprint(n/2)); err != nil {
		t.Fatal(err)
	}
	r := tr.stopRecording(t)
	kept := countQueries(t, r)
	if r.Summary == nil {
		t.Fatal("the recording has no summary")
	}
	// Every query is seen, and recorded or counted lost: 33,000 a second
	// can fill the ring buffer while the shared machine holds the reader
	// back. Half of them recorded at least (50,000 fingerprints) keeps the
	// memory checks below meaningful.
	sum := r.Summary
	lost := sum.Drops["ringbuf_full"]
	if sum.Queries < n || uint64(kept)+lost != sum.Queries || kept < n/2 {
		t.Fatalf("%d queries sent, %d seen, %d recorded, %d lost (ring buffer full): want all seen, recorded or counted lost, half recorded",
			n, sum.Queries, kept, lost)
	}
	if sum.Cost == nil || sum.Cost.MaxRSSBytes > testenv.MemoryBudget {
		t.Errorf("record's peak memory %+v, budget %d MiB", sum.Cost, testenv.MemoryBudget>>20)
	}
	// GNU time forks before it runs report: report's peak is its own, not
	// this big test process's, which a child of os/exec inherits.
	var timeOut bytes.Buffer
	cmd := exec.Command("/usr/bin/time", "-f", "%M", binary, "report", file)
	cmd.Stderr = &timeOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("report: %v: %s", err, timeOut.String())
	}
	var rss uint64
	if _, err := fmt.Sscan(strings.TrimSpace(timeOut.String()), &rss); err != nil {
		t.Fatalf("GNU time's output %q: %v", timeOut.String(), err)
	}
	rss <<= 10 // kilobytes
	var recorded, fps int
	if i := strings.Index(string(out), "queries recorded, "); i < 0 {
		t.Fatalf("report of the flood:\n%.2000s", out)
	} else {
		fmt.Sscanf(string(out[strings.LastIndexByte(string(out[:i]), '\n')+1:]), "%d queries recorded, %d fingerprints", &recorded, &fps)
	}
	if recorded != kept || fps < kept*99/100 { // random column names repeat now and then
		t.Errorf("the report found %d queries and %d fingerprints, want %d and about as many", recorded, fps, kept)
	}
	if rss > testenv.MemoryBudget {
		t.Errorf("report's peak memory %d MiB, budget %d MiB", rss>>20, testenv.MemoryBudget>>20)
	}
	t.Logf("record: %d queries, peak RSS %d MiB; report: %d fingerprints, peak RSS %d MiB", kept, sum.Cost.MaxRSSBytes>>20, fps, rss>>20)
}
