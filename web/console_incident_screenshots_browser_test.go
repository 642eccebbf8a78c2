package web_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's incident walk-through, as a reviewer lives it: the refunds provider had an
// outage, and a dozen refunds are UNKNOWN on top of a normal day. The reviewer filters the
// queue to them and saves the filter for the team, finds one customer's refund by its order
// id, and retries all the outage's refunds at once on the provider's word that none reached
// it, which the console makes her confirm twice, since refunds.issue cannot recognise a
// repeat. Meanwhile a colleague settled one from the provider's dashboard: the result page says
// so, and the ledger agrees. `IDEMGATE_SCREENSHOTS=docs go test -run
// TestBrowserIncidentScreenshots ./web/` writes docs/screenshots/incident-*.png.
func TestBrowserIncidentScreenshots(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	seedDay(t, con)
	var outage []*models.Operation
	for i := range 12 {
		order := 2001 + i
		outage = append(outage, con.Operation(t, consoletest.Seed{Tenant: "demo", Key: fmt.Sprintf("order-%d:refund", order),
			Tool: "refunds.issue", Params: fmt.Sprintf(`{"amount_cents":%d,"currency":"EUR","order_id":"%d"}`, 1500+i*250, order),
			Unknown: true, Review: true}))
		con.Clock.Advance(20 * time.Second) // the outage's requests, over four minutes
	}
	con.Clock.Advance(6 * time.Minute) // the reviewer gets to them
	pw := con.User(t, "reviewer@demo.local", models.RoleReviewer, "demo")
	colleague := models.Requester{Actor: "user:ravi@demo.local"}
	_, err := con.Ledger.ClaimReview(t.Context(), models.AllTenants(), colleague, "demo", outage[0].ID, 0)
	require.NoError(t, err)

	// 1. The queue, filtered to the outage's tool, saved as a view for the team.
	signIn(t, ctx, con.URL+"/login?next=%2Freviews%3Ftool%3Drefunds.issue", "reviewer@demo.local", pw)
	run(t, ctx, chromedp.WaitVisible(testID("bulk-bar")))
	run(t, ctx, chromedp.SendKeys(testID("save-view-name"), "Refunds outage"), leaving(),
		chromedp.Click(testID("save-view-submit")), left(), chromedp.WaitVisible(testID("saved-view-link")))
	assert.Equal(t, "Refunds outage", value(t, ctx, chromedp.Text(testID("saved-view-link"))))
	assert.Contains(t, value(t, ctx, chromedp.Text(`[data-operation-id="`+outage[0].ID+`"] `+testID("review-claim"))), "ravi@demo.local")
	docsScreenshot(t, ctx, "incident-queue", 1400)

	// 2. A customer asks about order 2007: found by a param's value.
	run(t, ctx, chromedp.Navigate(con.URL+"/operations"), chromedp.WaitVisible(testID("search-form")),
		chromedp.SendKeys(testID("search-param"), "order_id = 2007"), leaving(), chromedp.Click(testID("search-submit")),
		left(), chromedp.WaitVisible(testID("search-results")))
	assert.Equal(t, []string{outage[6].ID}, rowIDs(t, ctx, "search-results"))
	docsScreenshot(t, ctx, "incident-search", 620)

	// 3. The provider's word: none of the outage's refunds reached it. Retry them all.
	run(t, ctx, chromedp.Navigate(con.URL+"/reviews?tool=refunds.issue"), chromedp.WaitVisible(testID("bulk-bar")),
		chromedp.SetValue(testID("bulk-action"), models.ActionConfirmNotExecuted),
		chromedp.Click(testID("bulk-all")), chromedp.Click(testID("bulk-continue")), chromedp.WaitVisible(testID("bulk-risk")))
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("bulk-risk-text"))), "cannot recognise a repeat")
	run(t, ctx, chromedp.SendKeys(testID("bulk-reason"), "Provider incident PRV-311: none of these requests reached the provider (its status page and support)."),
		chromedp.Click(testID("bulk-risk-accept")))
	docsScreenshot(t, ctx, "incident-bulk-confirm", 900)

	// Meanwhile the colleague found one in the provider's dashboard.
	settled := outage[0]
	_, err = con.Ledger.ConfirmSucceeded(t.Context(), models.Action{Scope: models.AllTenants(), Tenant: "demo",
		OperationID: settled.ID, Actor: colleague.Actor, Reason: "R-90211 in the provider's dashboard, made by this operation.",
		ExpectedState: models.StateUnknown, ExpectedAttempts: settled.Attempts}, "R-90211", nil)
	require.NoError(t, err)

	// 4. Applied: one transaction and one audit entry per refund; the settled one is refused.
	run(t, ctx, chromedp.Click(testID("bulk-apply")), chromedp.WaitVisible(testID("bulk-done")))
	assert.Equal(t, "12", value(t, ctx, chromedp.Text(testID("bulk-done"))), "the outage's other eleven and the day's order-1044")
	assert.Equal(t, "1", value(t, ctx, chromedp.Text(testID("bulk-refused"))))
	docsScreenshot(t, ctx, "incident-bulk-result", 900)
	for _, op := range outage {
		want := models.StatePending
		if op.ID == settled.ID {
			want = models.StateSucceeded
		}
		waitFor(t, con, op, want)
	}
}
