package output

import (
	"fmt"
	"strings"

	"github.com/dbiolat/dbiolat/internal/model"
)

// OTLPText says what became of the query records offered to an
// OpenTelemetry export, per signal: sent, and each reason some were not,
// the losses in capitals as DropsText has them.
func OTLPText(counts []model.OTLPCount) string {
	var parts []string
	for _, signal := range model.OTLPSignals {
		of := func(outcome string) uint64 {
			for _, c := range counts {
				if c.Signal == signal && c.Outcome == outcome {
					return c.Count
				}
			}
			return 0
		}
		part := fmt.Sprintf("%s %d sent", signal, of("sent"))
		for _, d := range model.OTLPDrops {
			if n := of(d.Name); n > 0 {
				what := "not sent"
				if d.Loss {
					what = "LOST"
				}
				part += fmt.Sprintf(", %d %s (%s)", n, what, d.Text)
			}
		}
		parts = append(parts, part)
	}
	return "otlp: " + strings.Join(parts, "; ")
}
