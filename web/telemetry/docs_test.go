package telemetry_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/web/telemetry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

type fakeGauges struct{ err error }

func (f fakeGauges) Gauges(context.Context, models.Windows) (*models.Gauges, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &models.Gauges{OpenReviews: map[string]int64{models.ReasonUnknownOutcome: 2},
		Oldest: map[string]time.Duration{"UNKNOWN": time.Minute}, UnresolvedBeyondWindow: 3}, nil
}

// exposed returns the names of every metric the registry exposes once each has a sample.
func exposed(t *testing.T) map[string]bool {
	t.Helper()
	m := telemetry.New([]string{"tickets.create"}, nil)
	m.WatchLedger(fakeGauges{}, models.Windows{})
	m.Transitioned(models.Transition{Tool: "tickets.create", To: models.StateFailedFinal, ErrorClass: models.ErrorRetriesExhausted})
	m.Request("created")
	m.Attempt("tickets.create", "succeeded", time.Millisecond)
	m.Probe("tickets.create", "found")
	m.Waited("notified")
	m.PolicyDecided("big-refunds", "require_approval")
	m.BudgetUsage("refunds-per-agent", 0.5)
	m.HTTP("GET", "/healthz", 200, time.Millisecond)
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	return names
}

var metricName = regexp.MustCompile(`\bidemgate_[a-z_]+`)

func TestAlertsDashboardAndOperationsNameOnlyRealMetrics(t *testing.T) {
	names := exposed(t)
	alerts, err := os.ReadFile("../../docs/alerts.yml")
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(alerts, &rules))
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert)
			exprs = append(exprs, r.Expr)
		}
	}
	require.GreaterOrEqual(t, len(exprs), 4, "unresolved, retries exhausted, reconcile failures, ledger unavailable")

	dash, err := os.ReadFile("../../docs/grafana-dashboard.json")
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(dash, &d))
	require.NotEmpty(t, d.Panels)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	// docs/OPERATIONS.md tells operators what to watch: every metric it names must exist too.
	ops, err := os.ReadFile("../../docs/OPERATIONS.md")
	require.NoError(t, err)
	exprs = append(exprs, string(ops))
	for _, e := range exprs {
		for _, n := range metricName.FindAllString(e, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
			assert.True(t, names[base], "%q names metric %s, which idemgate does not expose", e, n)
		}
	}
}

func TestToolLabelsAreBounded(t *testing.T) {
	m := telemetry.New([]string{"tickets.create"}, nil)
	m.Attempt("made-up-by-an-agent", "succeeded", time.Millisecond)
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "idemgate_attempts_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "tool" {
					assert.Equal(t, "other", l.GetValue())
				}
			}
		}
	}
}

func TestLedgerDownIsExported(t *testing.T) {
	m := telemetry.New(nil, nil)
	m.WatchLedger(fakeGauges{err: context.DeadlineExceeded}, models.Windows{})
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	found := false
	for _, f := range families {
		if f.GetName() == "idemgate_ledger_up" {
			found = true
			assert.Equal(t, 0.0, f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	assert.True(t, found)
}
