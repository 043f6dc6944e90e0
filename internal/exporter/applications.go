package exporter

import (
	"cmp"
	"slices"
	"strings"
)

// The application label of the per-fingerprint series, bounded apart
// from them: at most maxApplications applications have a value of their
// own, the ones that sent the most query time in the last window, and
// every other one's queries count as application="other" (a connection
// that named none: application=""). Without it, clients that each name
// themselves apart (a pooler adding the client's address to the name, a
// job per run) would split every fingerprint into series too small to
// be among the busiest, and all would count in fingerprint="other".
// Membership is sticky as the fingerprints' is: an application keeps its
// value until a busier one takes it.

// OtherApplication labels the queries of the applications beyond the
// busiest.
const OtherApplication = "other"

// maxApplications bounds the applications named in the series' labels.
const maxApplications = 20

// applications are those named in the labels, and the window's others.
type applications struct {
	named      map[string]float64 // their query time in the window
	candidates map[string]float64 // the others' (at most maxCandidates)
}

func newApplications() *applications {
	return &applications{named: map[string]float64{}, candidates: map[string]float64{}}
}

// label is the value a query's application takes in the series' labels;
// the query's time counts for its application in the window.
func (a *applications) label(app string, ns float64) string {
	if app == "" {
		return ""
	}
	if _, ok := a.named[app]; ok {
		a.named[app] += ns
		return app
	}
	if _, ok := a.candidates[app]; ok || len(a.candidates) < maxCandidates {
		a.candidates[app] += ns
	}
	return OtherApplication
}

// endWindow names the window's busiest candidates, in the place of named
// applications less busy in it, and starts the next window.
func (a *applications) endWindow() {
	cands := make([]string, 0, len(a.candidates))
	for app := range a.candidates {
		cands = append(cands, app)
	}
	slices.SortFunc(cands, func(x, y string) int {
		return cmp.Or(cmpDesc(a.candidates[x], a.candidates[y]), strings.Compare(x, y))
	})
	for _, app := range cands {
		if len(a.named) >= maxApplications {
			least, leastNs := "", 0.0
			for n, ns := range a.named {
				if least == "" || ns < leastNs || (ns == leastNs && n > least) {
					least, leastNs = n, ns
				}
			}
			if a.candidates[app] <= leastNs {
				break
			}
			delete(a.named, least)
		}
		a.named[app] = a.candidates[app] // ranked by it until the window ends
	}
	for app := range a.named {
		a.named[app] = 0
	}
	clear(a.candidates)
}
