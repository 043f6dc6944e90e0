package otlp

import (
	"sync/atomic"

	"github.com/dbiolat/dbiolat/internal/model"
)

// sent is the outcome of records exported.
const sent = "sent"

// counts are the outcomes of the records offered, by signal: sent, or
// dropped by a reason of the catalog's OTLPDrops. Any goroutine adds and
// reads them.
type counts struct {
	n [2][]atomic.Uint64 // by signal (model.OTLPSignals), then outcome (outcomes)
}

// outcomes are "sent" and the catalog's reasons, in its order.
func outcomes() []string {
	out := []string{sent}
	for _, d := range model.OTLPDrops {
		out = append(out, d.Name)
	}
	return out
}

func newCounts() *counts {
	c := &counts{}
	for i := range c.n {
		c.n[i] = make([]atomic.Uint64, len(outcomes()))
	}
	return c
}

// add counts n records of one signal ("logs", "traces") with an outcome.
func (c *counts) add(signal, outcome string, n int) {
	for i, s := range model.OTLPSignals {
		if s != signal {
			continue
		}
		for j, o := range outcomes() {
			if o == outcome {
				c.n[i][j].Add(uint64(n))
				return
			}
		}
	}
	panic("otlp: no outcome " + signal + "/" + outcome) // a reason not in the catalog
}

// both counts n records of each signal with an outcome: a query dropped
// before it became records.
func (c *counts) both(outcome string, n int) {
	for _, s := range model.OTLPSignals {
		c.add(s, outcome, n)
	}
}

// list is every count, zeros included (a scrape shows each series from
// the start).
func (c *counts) list() []model.OTLPCount {
	var out []model.OTLPCount
	for i, s := range model.OTLPSignals {
		for j, o := range outcomes() {
			out = append(out, model.OTLPCount{Signal: s, Outcome: o, Count: c.n[i][j].Load()})
		}
	}
	return out
}
