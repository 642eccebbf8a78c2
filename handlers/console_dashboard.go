package handlers

import (
	"maps"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// The series of the dashboard's charts, in stacking order.
var (
	attemptSeries = []views.ChartSeries{
		{Key: string(jobs.Succeeded), Label: "succeeded", Class: "series-ok"},
		{Key: string(jobs.Rejected), Label: "rejected", Class: "series-bad"},
		{Key: string(jobs.Ambiguous), Label: "ambiguous", Class: "series-warn"},
		{Key: string(jobs.Throttled), Label: "throttled", Class: "series-alt"},
		{Key: string(jobs.NotSent), Label: "not sent", Class: "series-muted"},
		{Key: "running", Label: "running or other", Class: "series-info"},
	}
	probeSeries = []views.ChartSeries{
		{Key: jobs.ProbeFound, Label: "found", Class: "series-ok"},
		{Key: jobs.ProbeNotFound, Label: "not found", Class: "series-muted"},
		{Key: jobs.ProbeNotSettled, Label: "not settled yet", Class: "series-warn"},
		{Key: jobs.ProbeError, Label: "error or other", Class: "series-bad"},
	}
)

// Dashboard shows where the viewer's operations stand and what waits for people.
func (h *Console) Dashboard(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	d, err := h.Ledger.Dashboard(c.Request().Context(), v.Scope, jobs.Windows(h.Catalog))
	if err != nil {
		return err
	}
	p := views.DashboardPage{Page: h.page(c, v, "Dashboard", views.NavDashboard), OpenReviews: d.OpenReviews, OverdueCount: d.OverdueCount}
	for _, s := range models.States {
		n := d.ByState[s]
		p.Total += n
		p.States = append(p.States, views.StateCount{State: string(s), Count: n, Href: "/operations?state=" + url.QueryEscape(string(s))})
	}
	if p.Approvals = d.ByState[models.StateAwaitingApproval]; p.Approvals > 0 {
		if p.ApprovalsSum, p.ApprovalsPartial, err = h.approvalsAtStake(c, v); err != nil {
			return err
		}
	}
	if d.OldestUnresolved != nil {
		r := operationRow(d.OldestUnresolved, d.Now)
		p.Oldest, p.OldestAge = &r, views.Age(d.Now.Sub(d.OldestUnresolved.CreatedAt))
	}
	for _, op := range d.Overdue {
		r := operationRow(op, d.Now)
		r.Why = overdueReason(op, d.Now)
		p.Overdue = append(p.Overdue, r)
	}
	p.Attempts = views.NewChart("chart-attempts", "Attempts by outcome", "attempts", attemptSeries, chartBuckets(d.Attempts))
	p.Probes = views.NewChart("chart-probes", "Reconciliation probes by outcome", "probes", probeSeries, chartBuckets(d.Probes))
	return renderPage(c, http.StatusOK, views.Dashboard(p))
}

func overdueReason(op *models.Operation, now time.Time) string {
	switch {
	case op.State == models.StateUnknown && op.UnknownSince != nil:
		return "UNKNOWN for " + views.Age(now.Sub(*op.UnknownSince))
	case op.State == models.StateRunning && op.LeaseExpiresAt != nil:
		return "lease expired " + views.Age(now.Sub(*op.LeaseExpiresAt)) + " ago"
	case op.State == models.StatePending && op.NextAttemptAt != nil:
		return "due " + views.Age(now.Sub(*op.NextAttemptAt)) + " ago, not picked up"
	}
	return string(op.State)
}

func chartBuckets(in []models.Bucket) []views.ChartBucket {
	out := make([]views.ChartBucket, len(in))
	for i, b := range in {
		out[i] = views.ChartBucket{Start: b.Start, Counts: b.Counts}
	}
	return out
}

// approvalsSummed is how many operations awaiting approval the dashboard sums, the newest.
const approvalsSummed = 500

// approvalsAtStake sums what the operations awaiting approval put at stake, per currency
// ("4,649.00 EUR + 120.00 USD"), from their masked params as the operation pages read them;
// partial when there are more than it sums.
func (h *Console) approvalsAtStake(c echo.Context, v *Viewer) (string, bool, error) {
	ops, more, err := h.Ledger.SearchOperations(c.Request().Context(), v.Scope,
		models.Search{State: models.StateAwaitingApproval, Limit: approvalsSummed})
	if err != nil {
		return "", false, err
	}
	totals := map[string]*big.Int{}
	for _, op := range ops {
		st := stakesOf(h.Catalog, op)
		if st.Minor == nil {
			continue
		}
		if totals[st.Currency] == nil {
			totals[st.Currency] = new(big.Int)
		}
		totals[st.Currency].Add(totals[st.Currency], st.Minor)
	}
	currencies := slices.Sorted(maps.Keys(totals))
	parts := make([]string, len(currencies))
	for i, cur := range currencies {
		parts[i] = catalog.Money(totals[cur].String(), cur)
	}
	return strings.Join(parts, " + "), more, nil
}
