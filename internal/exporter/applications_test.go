package exporter

import (
	"fmt"
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
)

// appLabels reads dbiolat_fingerprint_calls_total by application label.
func appLabels(t *testing.T, e *Exporter) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range gather(t, e)["dbiolat_fingerprint_calls_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "application" {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func appQuery(app, fp string, ns uint64) *model.Query {
	q := query(fp, ns)
	q.Application = app
	return q
}

// 50 applications, and clients naming themselves apart on every
// connection (10,000 names), over one statement: at most maxApplications
// names and "other" in the labels, and the series add up to every query.
func TestApplicationLabelBounded(t *testing.T) {
	const top, queries = 50, 20000
	e := New(top)
	named := 0
	for i := range queries {
		app := fmt.Sprintf("job-%d", i%50)
		if i%2 == 1 {
			app = fmt.Sprintf("once-%d", i)
		}
		e.Observe(appQuery(app, "aaaa", uint64(1+i%50)))
		if i%2000 == 1999 {
			e.Add(&model.Interval{})
			e.EndWindow()
			got := appLabels(t, e)
			var sum float64
			for _, n := range got {
				sum += n
			}
			if len(got) > maxApplications+1 || sum != float64(i+1) {
				t.Fatalf("after %d queries: %d application labels (want at most %d), %v calls", i+1, len(got), maxApplications+1, sum)
			}
			named = max(named, len(got)-1)
		}
	}
	if named == 0 {
		t.Errorf("no application was ever named")
	}
}

// The busiest applications of a window are named from the next one on,
// and their fingerprints get series of their own at that window's end, as
// any fingerprint does; a connection that named none has application="";
// a busier application later takes the place of the least busy, and one
// as busy as the least busy named (app19) does not.
func TestApplicationLabelFollowsTheBusiest(t *testing.T) {
	e := New(10)
	window := func(qs ...*model.Query) map[string]float64 {
		for _, q := range qs {
			e.Observe(q)
		}
		e.Add(&model.Interval{})
		got := appLabels(t, e)
		e.EndWindow()
		return got
	}
	first := []*model.Query{appQuery("web", "a", 300), appQuery("", "a", 10)}
	for i := range maxApplications { // as busy as each other, less than web
		first = append(first, appQuery(fmt.Sprintf("app%02d", i), "a", 100))
	}
	window(first...)
	window(appQuery("web", "a", 300), appQuery("", "a", 10), appQuery("late", "a", 1000))
	got := window(appQuery("web", "a", 300), appQuery("", "a", 10), appQuery("late", "a", 1000), appQuery("app19", "a", 1000))
	if got["web"] != 1 || got[""] != 2 || got["late"] != 0 || got[OtherApplication] != 26 {
		t.Errorf("in the third window: %v, want web and none named, late not yet, the rest in other", got)
	}
	if got := window(appQuery("late", "a", 1000)); got["late"] != 1 || got["app19"] != 0 || got["web"] != 1 {
		t.Errorf("the busiest of the second window has no series of its own in the fourth: %v", got)
	}
}
