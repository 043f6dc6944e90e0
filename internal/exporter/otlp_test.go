package exporter

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dbiolat/dbiolat/internal/model"
)

// The export's counts are one counter by signal, outcome and reason,
// linted as the others are.
func TestOTLPRecords(t *testing.T) {
	c := OTLPCollector(func() []model.OTLPCount {
		return []model.OTLPCount{{Signal: "logs", Outcome: "sent", Count: 7}, {Signal: "traces", Outcome: "queue_full", Count: 3}}
	})
	want := `
# HELP dbiolat_otlp_records_total ` + otlpHelp() + `
# TYPE dbiolat_otlp_records_total counter
dbiolat_otlp_records_total{outcome="dropped",reason="queue_full",signal="traces"} 3
dbiolat_otlp_records_total{outcome="sent",reason="",signal="logs"} 7
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
