package otlp

import (
	"math/rand/v2"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
)

// chooser picks the queries to export: those at least threshold long,
// and a sample of the others, at most rate a second (a token bucket
// holding a second's worth, so a burst after a quiet spell is bounded too).
type chooser struct {
	threshold time.Duration // negative: none over a threshold
	sample    float64       // the share of the others drawn
	rate      float64       // records a second
	tokens    float64
	last      time.Time
	rand      *rand.Rand
}

func newChooser(threshold time.Duration, sample, rate float64) *chooser {
	return &chooser{threshold: threshold, sample: sample, rate: rate, tokens: rate, rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
}

// choose says whether to export q, finished at now: "" to export it, or
// the reason not to (the catalog's OTLPDrops).
func (c *chooser) choose(q *model.Query, now time.Time) string {
	slow := c.threshold >= 0 && time.Duration(q.QueryNs) >= c.threshold
	if !slow && !q.Sampled && (c.sample <= 0 || c.rand.Float64() >= c.sample) { // Sampled: the kernel drew it
		return "not_sampled"
	}
	if !c.last.IsZero() {
		c.tokens = min(c.rate, c.tokens+now.Sub(c.last).Seconds()*c.rate)
	}
	c.last = now
	if c.tokens < 1 {
		return "rate_limited"
	}
	c.tokens--
	return ""
}
