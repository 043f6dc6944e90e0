package postgres

import (
	"strings"
	"testing"
)

// The offsets of st_query_id: one per supported version, none guessed for
// others, and a sentence for each unknown.
func TestQueryIDOffset(t *testing.T) {
	for v := 15; v <= 19; v++ {
		off, err := QueryIDOffset(v)
		if err != nil || off != 424 {
			t.Errorf("PostgreSQL %d: offset %d, %v; want 424 (0x1a8, as its pgstat_report_query_id writes)", v, off, err)
		}
	}
	for _, c := range []struct {
		version int
		says    string
	}{
		{0, "PostgreSQL 0 keeps its query id is not known"},
		{13, "computes no query ids"},
		{14, "is not known"}, // computes them, never checked here
		{20, "PostgreSQL 20 keeps its query id is not known"},
	} {
		off, err := QueryIDOffset(c.version)
		if err == nil || off != 0 || !strings.Contains(err.Error(), c.says) {
			t.Errorf("PostgreSQL %d: offset %d, %v; want 0 and an error saying %q", c.version, off, err, c.says)
		}
	}
}
