package session

import "testing"

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
