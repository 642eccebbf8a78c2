package telemetry

import (
	"context"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/prometheus/client_golang/prometheus"
)

// GaugeSource reads the ledger-wide figures at scrape time.
type GaugeSource interface {
	Gauges(ctx context.Context, w models.Windows) (*models.Gauges, error)
}

// ledgerCollector exports what is waiting in the ledger, and whether the ledger answers. It
// queries at scrape time (a few indexed reads), so the figures are never stale.
type ledgerCollector struct {
	src     GaugeSource
	windows models.Windows

	reviewsOpen *prometheus.Desc
	oldest      *prometheus.Desc
	beyond      *prometheus.Desc
	up          *prometheus.Desc
}

// WatchLedger registers the ledger gauges: idemgate_reviews_open{reason},
// idemgate_oldest_seconds{state}, idemgate_unresolved_beyond_window and idemgate_ledger_up.
func (m *Metrics) WatchLedger(src GaugeSource, w models.Windows) {
	m.Registry.MustRegister(&ledgerCollector{src: src, windows: w,
		reviewsOpen: prometheus.NewDesc("idemgate_reviews_open", "Open reviews by reason.", []string{"reason"}, nil),
		oldest:      prometheus.NewDesc("idemgate_oldest_seconds", "Age of the oldest RUNNING, UNKNOWN and PENDING operation and of the oldest open review (state=\"review\").", []string{"state"}, nil),
		beyond:      prometheus.NewDesc("idemgate_unresolved_beyond_window", "Operations unresolved beyond their expected recovery window.", nil, nil),
		up:          prometheus.NewDesc("idemgate_ledger_up", "1 when the ledger answered the last scrape, else 0.", nil, nil),
	})
}

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.reviewsOpen
	ch <- c.oldest
	ch <- c.beyond
	ch <- c.up
}

func (c *ledgerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	g, err := c.src.Gauges(ctx, c.windows)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, reason := range []string{models.ReasonUnknownOutcome, models.ReasonApprovalRequired, models.ReasonCompensationApproval, models.ReasonManual} {
		ch <- prometheus.MustNewConstMetric(c.reviewsOpen, prometheus.GaugeValue, float64(g.OpenReviews[reason]), reason)
	}
	for _, state := range []string{"RUNNING", "UNKNOWN", "PENDING", "review"} {
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, g.Oldest[state].Seconds(), state)
	}
	ch <- prometheus.MustNewConstMetric(c.beyond, prometheus.GaugeValue, float64(g.UnresolvedBeyondWindow))
}
