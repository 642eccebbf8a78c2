package views_test

import (
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"github.com/idemgate/idemgate/static"
	"github.com/idemgate/idemgate/views"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	now   = time.Date(2026, 11, 29, 10, 30, 0, 0, time.UTC)
	rita  = views.Page{User: &views.User{Email: "rita@example.com", Role: "reviewer"}, CSRFToken: "tok"}
	opRow = views.OperationRow{ID: "op_1", Href: "/operations/op_1", Tenant: "acme", Key: "order-1042:refund",
		Tool: "refunds.issue", State: "UNKNOWN", Created: views.NewTime(now.Add(-42*time.Minute), now)}
)

// Every console page renders as a document that obeys the CSP (see render).
func TestConsolePagesRender(t *testing.T) {
	t.Parallel()
	chart := views.NewChart("chart-attempts", "Attempts", "attempts",
		[]views.ChartSeries{{Key: "succeeded", Label: "succeeded", Class: "series-ok"}},
		[]views.ChartBucket{{Start: now.Truncate(time.Hour), Counts: map[string]int64{"succeeded": 3}}})
	pages := map[string]templ.Component{
		"login":     views.Login(views.LoginPage{Page: views.Page{Title: "Sign in", CSRFToken: "tok"}, Error: "Wrong email or password."}),
		"dashboard": views.Dashboard(views.DashboardPage{Page: rita, States: []views.StateCount{{State: "UNKNOWN", Count: 1, Href: "/operations?state=UNKNOWN"}}, Oldest: &opRow, Overdue: []views.OperationRow{opRow}, OverdueCount: 1, Attempts: chart, Probes: chart}),
		"reviews":   views.Reviews(views.ReviewsPage{Page: withScripts(rita), List: views.ReviewList{Src: "/reviews/list?", Items: []views.ReviewRow{{ID: "rev_1", Reason: "unknown_outcome", Operation: opRow}}}}),
		"search":    views.Operations(views.SearchPage{Page: rita, Rows: []views.OperationRow{opRow}, NextHref: "/operations?before=op_1"}),
		"operation": views.Operation(views.OperationPage{Page: rita, Op: opRow, Params: `{"card_number": "***"}`, ResultNote: "No result recorded.",
			Timeline: views.Timeline{Rows: []views.TimelineRow{{Kind: "attempt-unclear", Title: "Attempt 1: outcome unclear", From: "RUNNING", To: "UNKNOWN", Actor: "worker:w",
				Facts: []views.Detail{{Name: "Downstream status", Value: "HTTP 504"}}, IDs: []views.Detail{{Name: "Request id", Value: "att_1"}}}},
				Raw: []views.RawEvent{{ID: "1", Type: "created", Actor: "api:agent", To: "PENDING", Detail: `{"fingerprint":"x"}`}}}}),
		"workflow":               views.Workflow(views.WorkflowPage{Page: rita, RunID: "wf-1", Rows: []views.OperationRow{opRow}}),
		"operation with actions": views.Operation(views.OperationPage{Page: rita, Op: opRow, Actions: views.ActionsPanel(actionPanel())}),
		"audit": views.AuditLog(views.AuditPage{Page: rita, HeadSeq: "2", HeadHash: "sha256:ab", Verified: &views.AuditVerification{Seq: "1", Since: "1"},
			Rows: []views.AuditRow{{Seq: "2", Actor: "cli", Action: "tenant.create", Outcome: "ok", Detail: []views.Detail{{Name: "reason", Value: "x"}}}}}),
		"exports": views.Exports(views.ExportsPage{Page: rita, Formats: []views.Option{{Value: "csv", Label: "CSV"}}, Error: "Choose CSV or NDJSON."}),
		"admin": views.Admin(views.AdminPage{Page: rita, MayCreateTenants: true, NewKey: &views.NewKeyInfo{Secret: "idg_secret"},
			Keys: []views.KeyRow{{ID: "key_1", Prefix: "idg_abcdefgh"}}, TenantOptions: []views.Option{{Value: "acme", Label: "acme"}}}),
	}
	for name, page := range pages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := render(t, page)
			assert.True(t, strings.HasPrefix(out, "<!doctype html>"))
			if name != "login" {
				assert.Contains(t, out, `data-testid="main-nav"`)
			}
			// Every form that posts carries the CSRF token.
			assert.Equal(t, strings.Count(out, `method="post"`), strings.Count(out, `name="csrf_token"`), "a post form without a token")
		})
	}
}

func withScripts(p views.Page) views.Page {
	p.Scripts = []string{"console.js"}
	return p
}

// A signed-out page loads no script; a signed-in one loads console.js once (its keyboard
// shortcuts work everywhere), whether or not the page asked for it too.
func TestLayoutScripts(t *testing.T) {
	t.Parallel()
	out := render(t, views.Layout(views.Page{Title: "Sign in"}, templ.NopComponent))
	assert.NotContains(t, out, "<script")
	tag := `<script src="` + static.Path("console.js") + `" defer></script>`
	for _, p := range []views.Page{rita, withScripts(rita)} {
		out = render(t, views.Layout(p, templ.NopComponent))
		assert.Equal(t, 1, strings.Count(out, tag), out)
	}
}

func TestReviewListRefreshesFromItsFragment(t *testing.T) {
	t.Parallel()
	out := render(t, views.ReviewListFragment(views.ReviewList{Src: "/reviews/list?tool=refunds.issue"}))
	assert.Contains(t, out, `data-auto-refresh="/reviews/list?tool=refunds.issue"`)
	assert.Contains(t, out, "No open reviews.")
}

func TestChartGeometry(t *testing.T) {
	t.Parallel()
	series := []views.ChartSeries{{Key: "ok", Label: "ok", Class: "series-ok"}, {Key: "bad", Label: "bad", Class: "series-bad"}}
	start := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	buckets := make([]views.ChartBucket, 24)
	for i := range buckets {
		buckets[i] = views.ChartBucket{Start: start.Add(time.Duration(i) * time.Hour), Counts: map[string]int64{}}
	}
	buckets[3].Counts = map[string]int64{"ok": 6, "bad": 2}
	buckets[4].Counts = map[string]int64{"weird": 4} // an unknown key goes to the last series

	c := views.NewChart("c", "Attempts", "attempts", series, buckets)
	require.Len(t, c.Bars, 24)
	assert.False(t, c.Empty)
	assert.Equal(t, "8", c.Max)
	assert.Equal(t, int64(6), c.Series[0].Total)
	assert.Equal(t, int64(6), c.Series[1].Total)
	assert.Equal(t, "12 attempts in the last 24 hours: 6 ok, 6 bad.", c.Summary)
	require.Len(t, c.Bars[3].Segments, 2)
	assert.Equal(t, "12.0", c.Bars[3].Segments[1].Y, "the tallest bar reaches the top of the plot")
	assert.Contains(t, c.Bars[3].Title, "03:00–04:00 UTC\nok: 6\nbad: 2")
	assert.Len(t, c.Ticks, 4, "a label every six hours")

	empty := views.NewChart("c", "Attempts", "attempts", series, buckets[:1])
	assert.True(t, empty.Empty)
	assert.Equal(t, "No attempts in the last 24 hours.", empty.Summary)
}

func TestAge(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		12 * time.Second:                 "12 s",
		4 * time.Minute:                  "4 min",
		2*time.Hour + 5*time.Minute:      "2 h 5 min",
		3 * time.Hour:                    "3 h",
		(3*24+4)*time.Hour + time.Minute: "3 d 4 h",
	} {
		assert.Equal(t, want, views.Age(d))
	}
	assert.Equal(t, "42 min ago", opRow.Created.Age)
	assert.Equal(t, "2026-11-29 09:48:00 UTC", opRow.Created.Text)
}
