package exporter

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbiolat/dbiolat/internal/model"
)

var otlpDesc = prometheus.NewDesc("dbiolat_otlp_records_total", otlpHelp(), []string{"signal", "outcome", "reason"}, nil)

// otlpHelp describes the counter, its reasons from the catalog.
func otlpHelp() string {
	var reasons []string
	for _, d := range model.OTLPDrops {
		kind := "a choice"
		if d.Loss {
			kind = "a loss"
		}
		reasons = append(reasons, fmt.Sprintf("%s (%s: %s)", d.Name, kind, d.Text))
	}
	return "Query records offered to the OpenTelemetry export (--otlp), by signal (" + strings.Join(model.OTLPSignals, ", ") +
		") and outcome: sent, or dropped for a reason: " + strings.Join(reasons, "; ") + "."
}

// OTLPCollector reports what became of the records offered to an
// OpenTelemetry export, as counts reads them at each scrape.
func OTLPCollector(counts func() []model.OTLPCount) prometheus.Collector {
	return otlpCollector(counts)
}

type otlpCollector func() []model.OTLPCount

func (otlpCollector) Describe(ch chan<- *prometheus.Desc) { ch <- otlpDesc }

func (c otlpCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c() {
		outcome, reason := "dropped", n.Outcome
		if n.Outcome == "sent" {
			outcome, reason = "sent", ""
		}
		ch <- prometheus.MustNewConstMetric(otlpDesc, prometheus.CounterValue, float64(n.Count), n.Signal, outcome, reason)
	}
}
