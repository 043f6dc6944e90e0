package session

import (
	"testing"

	"github.com/dbiolat/dbiolat/internal/postgres"
)

// A long pipeline's captures come in turn, each with the place of its
// first statement; a record names its statements from all of them.
func TestPipelineTexts(t *testing.T) {
	ps := pipelines{}
	ps.learn(7, 0, []string{"INSERT a", "INSERT a"}) // the first read's capture
	ps.learn(7, 5, []string{"INSERT a", "UPDATE b"}) // a later read: statements 5 and 6
	p := ps.learn(7, 6, []string{"UPDATE b", "DELETE c"})
	for _, c := range []struct {
		first, n int
		want     string
	}{
		{0, 1, "INSERT a"},
		{0, 7, "INSERT a;\nUPDATE b"}, // statements 2 to 4 were never captured
		{6, 2, "UPDATE b;\nDELETE c"},
		{2, 3, "-- statements 3 to 5 of a pipeline, past the bytes captured"},
		{9, 1, "-- statements 10 to 10 of a pipeline, past the bytes captured"},
	} {
		if got := p.textOf(c.first, c.n, "PREPARE only"); got != c.want {
			t.Errorf("statements %d+%d: %q, want %q", c.first, c.n, got, c.want)
		}
	}
	// A new round trip starts over; one that only prepares is what it prepared.
	if got := ps.learn(7, 0, nil).textOf(0, 0, "SELECT $1"); got != "SELECT $1" {
		t.Errorf("a round trip that ran none: %q", got)
	}
	// The window is bounded.
	ps.learn(8, 0, make([]string, maxPipelineTexts))
	if p := ps.learn(8, maxPipelineTexts, []string{"x"}); len(p.texts) != maxPipelineTexts || p.first != 1 {
		t.Errorf("window of %d texts from %d", len(p.texts), p.first)
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
