package session

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/postgres"
)

// A long pipeline's captures come in turn, each with the place of its
// first statement; a record names its statements from all of them.
func TestPipelineTexts(t *testing.T) {
	p := &pipeline{}
	p.learn(0, []string{"INSERT a", "INSERT a"}, true)  // the first read's capture
	p.learn(5, []string{"INSERT a", "UPDATE b"}, false) // a later read: statements 5 and 6
	p.learn(6, []string{"UPDATE b", "DELETE c"}, false)
	for _, c := range []struct {
		first, n int
		want     string
		unnamed  int
	}{
		{0, 1, "INSERT a", 0},
		{0, 7, "INSERT a;\nUPDATE b", 3}, // statements 2 to 4 were never captured
		{6, 2, "UPDATE b;\nDELETE c", 0},
		{2, 3, "-- statements 3 to 5 of a pipeline, past the bytes captured", 3},
		{9, 1, "-- statements 10 to 10 of a pipeline, past the bytes captured", 1},
		{9, 0, "-- statements 10 to 10 of a pipeline, past the bytes captured", 0}, // a part of a statement counts none
	} {
		if got, unnamed := p.textOf(c.first, c.n, "PREPARE only"); got != c.want || unnamed != c.unnamed {
			t.Errorf("statements %d+%d: %q (%d unnamed), want %q (%d)", c.first, c.n, got, unnamed, c.want, c.unnamed)
		}
	}
	// A new round trip starts over; one that only prepares is what it prepared.
	p.learn(0, nil, true)
	if got, _ := p.textOf(0, 0, "SELECT $1"); got != "SELECT $1" {
		t.Errorf("a round trip that ran none: %q", got)
	}
	// The window is bounded.
	p = &pipeline{}
	p.learn(0, make([]string, maxPipelineTexts), true)
	if p.learn(maxPipelineTexts, []string{"x"}, false); len(p.texts) != maxPipelineTexts || p.first != 1 {
		t.Errorf("window of %d texts from %d", len(p.texts), p.first)
	}
}

// wireMsg is one frontend message: its type, length and body.
func wireMsg(typ byte, body string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{typ}, uint32(4+len(body)))
	return append(b, body...)
}

// captureParts cuts a round trip's request as the kernel does
// (pgwire.bpf.c): reads of readSize bytes, each in parts of partSize; the
// first part of the round trip always, a later one if a message starts in
// it or it is the rest of a read whose first part was taken. Each part
// says where its first message starts and the Executes before it.
func captureParts(req []byte, readSize, partSize int) []capture {
	var starts []int // where each message starts
	for off := 0; off < len(req); off += 1 + int(binary.BigEndian.Uint32(req[off+1:])) {
		starts = append(starts, off)
	}
	firstFrom := func(from int) (at, execs int) {
		for _, s := range starts {
			if s >= from {
				return s, execs
			}
			execs += b2i(req[s] == 'E')
		}
		return len(req), execs
	}
	var parts []capture
	for read := 0; read < len(req); read += readSize {
		end := min(read+readSize, len(req))
		took := false
		for from := read; from < end; from += partSize {
			to := min(from+partSize, end)
			at, execs := firstFrom(from)
			if read == 0 && from == 0 {
				parts = append(parts, capture{first: 0, at: 0, text: req[:to]})
			} else if at < to || took {
				parts = append(parts, capture{part: true, first: execs, skip: min(at, to) - from, at: uint32(from), text: req[from:to]})
			} else {
				took = false
				continue
			}
			took = true
		}
	}
	return parts
}

// Every statement of a pipeline is named, whatever part its messages fall
// in: Parses and Binds cut between two parts are completed, a message
// longer than a part (a long parameter) too, and each record reading a
// part again changes nothing.
func TestPipelinePartsNameEveryStatement(t *testing.T) {
	st, ps := statements{}, pipelines{}
	// A statement prepared by an earlier round trip (pgx's statement cache).
	st.roundTrip(9, wireMsg('P', "stmtcache_1\x00SELECT * FROM cached WHERE k = $1\x00\x00\x00"))
	var req []byte
	var want []string
	for i := range 300 {
		switch i % 3 {
		case 0: // unnamed: a Parse of its own text each time, of varied length
			text := fmt.Sprintf("INSERT INTO t%d VALUES ($1) -- %s", i%7, strings.Repeat("x", i%50))
			req = append(req, wireMsg('P', "\x00"+text+"\x00\x00\x00")...)
			req = append(req, wireMsg('B', "\x00\x00\x00\x00\x00\x01\x00\x00\x00\x03abc\x00\x00")...)
			want = append(want, text)
		case 1: // the cached statement, with a long parameter now and then
			param := strings.Repeat("p", 10+(i%11)*700)
			req = append(req, wireMsg('B', "\x00stmtcache_1\x00\x00\x00\x00\x01"+string(binary.BigEndian.AppendUint32(nil, uint32(len(param))))+param+"\x00\x00")...)
			want = append(want, "SELECT * FROM cached WHERE k = $1")
		case 2: // a named statement of this round trip
			if i == 2 {
				req = append(req, wireMsg('P', "s2\x00UPDATE u SET v = $1\x00\x00\x00")...)
			}
			req = append(req, wireMsg('B', "\x00s2\x00\x00\x00\x00\x00\x00\x00")...)
			want = append(want, "UPDATE u SET v = $1")
		}
		req = append(req, wireMsg('E', "\x00\x00\x00\x00\x00")...)
	}
	req = append(req, wireMsg('S', "")...)
	parts := captureParts(req, 8192, 4096)
	var p *pipeline
	for _, c := range parts {
		for range 2 { // a record that teaches it, then one that carries it again
			p, _, _ = ps.read(st, 9, c)
		}
	}
	if len(parts) < 10 {
		t.Fatalf("only %d parts", len(parts))
	}
	for i, w := range want {
		if got, unnamed := p.textOf(i, 1, ""); got != w || unnamed != 0 {
			t.Errorf("statement %d: %q, want %q", i, got, w)
		}
	}
	// A part lost (the ring buffer full): the message cut at its start is
	// dropped, not joined to the wrong bytes; the others are named.
	st, ps = statements{}, pipelines{}
	st.roundTrip(9, wireMsg('P', "stmtcache_1\x00SELECT * FROM cached WHERE k = $1\x00\x00\x00"))
	for i, c := range parts {
		if i != 3 {
			p, _, _ = ps.read(st, 9, c)
		}
	}
	for i, w := range want {
		if got, _ := p.textOf(i, 1, ""); got != w && !strings.HasPrefix(got, "-- statements") {
			t.Errorf("statement %d, a part lost: %q, want %q or none", i, got, w)
		}
	}
}

// Statements whose portal was left suspended are counted by a later
// record, which names them from the records that suspended them: those
// its Closes name first, then the unnamed portal a new one replaced, then
// the newest; what the kernel no longer holds open is forgotten.
func TestSuspendedPortalsNamed(t *testing.T) {
	su := suspended{}
	su.opened(7, openPortal{"C_1", "SELECT a"}, 1)
	su.opened(7, openPortal{"C_2", "SELECT b"}, 2)
	su.opened(7, openPortal{"", "SELECT c"}, 3)
	if got := su.ended(7, 1, postgres.Portals{Closed: []string{"C_1"}}); got != "SELECT a" {
		t.Errorf("closed C_1: %q", got)
	}
	if got := su.ended(7, 1, postgres.Portals{Unnamed: true}); got != "SELECT c" {
		t.Errorf("a new unnamed portal: %q", got)
	}
	if got := su.ended(7, 1, postgres.Portals{Closed: []string{"C_9"}}); got != "SELECT b" {
		t.Errorf("a portal closed that was not open: %q", got)
	}
	// The kernel holds one open: the older ones completed unseen.
	su.opened(7, openPortal{"C_3", "SELECT d"}, 1)
	su.opened(7, openPortal{"C_4", "SELECT e"}, 1)
	if len(su[7]) != 1 {
		t.Errorf("kept %+v, the kernel holds one", su[7])
	}
	// A commit ending more than were seen suspend (before the trace).
	if got := su.ended(7, 3, postgres.Portals{}); got != "SELECT e" {
		t.Errorf("the commit: %q", got)
	}
	if got := su.ended(8, 1, postgres.Portals{}); got != "-- a portal suspended before the trace began" {
		t.Errorf("none seen: %q", got)
	}
	// Several of one text are one.
	for range 3 {
		su.opened(9, openPortal{"", "SELECT f"}, 3)
	}
	if got := su.ended(9, 3, postgres.Portals{}); got != "SELECT f" || len(su[9]) != 0 {
		t.Errorf("three of one: %q, left %+v", got, su[9])
	}
}
