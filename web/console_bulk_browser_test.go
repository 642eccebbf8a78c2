package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An outage left fifty refunds UNKNOWN. A reviewer selects all of them in the queue with one
// tick, marks them failed with one reason, and while the confirmation page is open another
// reviewer retries one of them. The result page says 49 done and 1 refused because it changed
// meanwhile, and the ledger agrees.
func TestBrowserBulkDecisionOverFifty(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	var ops []*models.Operation
	for i := range 50 {
		ops = append(ops, con.Operation(t, consoletest.Seed{Tenant: "acme", Key: fmt.Sprintf("order-%d:refund", 6000+i),
			Tool: "refunds.issue", Params: fmt.Sprintf(`{"amount_cents":%d,"currency":"EUR","order_id":"%d"}`, 1000+i, 6000+i),
			Unknown: true, Review: true}))
	}
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")

	signIn(t, ctx, con.URL+"/login?next=%2Freviews", "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("bulk-bar")))
	assert.Equal(t, 50, count(t, ctx, testID("bulk-pick")))
	assert.Equal(t, "All 50 matching this filter", value(t, ctx, chromedp.Text(testID("bulk-all-label"))))
	run(t, ctx,
		chromedp.SetValue(testID("bulk-action"), models.ActionMarkFailed),
		chromedp.Click(testID("bulk-all")),
		chromedp.Click(testID("bulk-continue")),
		chromedp.WaitVisible(testID("bulk-apply-form")),
	)
	assert.Equal(t, "Mark failed: 50 operations", value(t, ctx, chromedp.Text(testID("bulk-heading"))))
	assert.Equal(t, "danger", value(t, ctx, chromedp.AttributeValue(testID("bulk-apply"), "data-tone")).Value, "an end for good looks it")
	assert.Equal(t, 50, count(t, ctx, testID("bulk-row")))
	confirmURL := value(t, ctx, chromedp.Location())

	// Another reviewer retries one of them while the page is open.
	changed := ops[31]
	_, err := con.Ledger.ConfirmNotExecuted(t.Context(), models.Action{Scope: models.AllTenants(), Tenant: "acme",
		OperationID: changed.ID, Actor: "user:ravi@example.com", Reason: "Not in the payment system.",
		ExpectedState: models.StateUnknown, ExpectedAttempts: changed.Attempts})
	require.NoError(t, err)

	run(t, ctx,
		chromedp.SendKeys(testID("bulk-reason"), "Provider outage 4711: the provider confirmed none of these refunds went out."),
		chromedp.Click(testID("bulk-apply")),
		chromedp.WaitVisible(testID("bulk-done")),
	)
	assert.Equal(t, confirmURL, value(t, ctx, chromedp.Location()), "the result is shown where the confirmation was")
	assert.Equal(t, "49", value(t, ctx, chromedp.Text(testID("bulk-done"))))
	assert.Equal(t, "1", value(t, ctx, chromedp.Text(testID("bulk-refused"))))
	refusedRow := `[data-testid="bulk-row"][data-outcome="refused"]`
	assert.Equal(t, changed.ID, value(t, ctx, chromedp.AttributeValue(refusedRow, "data-operation-id")).Value)
	assert.Contains(t, value(t, ctx, chromedp.Text(refusedRow+" "+testID("bulk-outcome"))),
		"Changed meanwhile: it is PENDING now, not UNKNOWN as when you confirmed.")
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("notice"))), "49 done, 1 refused")
	screenshot(t, ctx, "bulk-result")

	for _, op := range ops {
		want := models.StateFailedFinal
		if op.ID == changed.ID {
			want = models.StatePending
		}
		rec := waitFor(t, con, op, want)
		if op.ID != changed.ID {
			require.NotNil(t, rec.Op.ErrorMessage)
			assert.True(t, strings.Contains(*rec.Op.ErrorMessage, "Provider outage 4711"), *rec.Op.ErrorMessage)
		}
	}

	// The back button and the same form again: nothing more happens.
	run(t, ctx, chromedp.NavigateBack(), chromedp.WaitVisible(testID("bulk-heading")))
	run(t, ctx, chromedp.Navigate(confirmURL), chromedp.WaitVisible(testID("bulk-done")))
	assert.Zero(t, count(t, ctx, testID("bulk-apply-form")), "an applied decision offers no second apply")
	assert.Equal(t, models.StatePending, waitFor(t, con, changed, models.StatePending).Op.State)
}

// A bulk retry over refunds (the downstream cannot recognise a repeat) and a ticket (it can):
// the confirmation names the risk and the count, the form cannot be sent without the second
// choice, and with "retry them too" every one goes back to PENDING.
func TestBrowserBulkRetryNamesTheRisk(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	var ops []*models.Operation
	for i := range 3 {
		ops = append(ops, con.Operation(t, consoletest.Seed{Tenant: "acme", Key: fmt.Sprintf("order-%d:refund", 7000+i),
			Tool: "refunds.issue", Params: fmt.Sprintf(`{"amount_cents":500,"currency":"EUR","order_id":"%d"}`, 7000+i),
			Unknown: true, Review: true}))
	}
	ops = append(ops, con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7100:ticket", Tool: "tickets.create",
		Params: `{"subject":"Printer on fire"}`, Unknown: true, Review: true}))
	for range 2 { // each refund asked twice; the ticket never
		probe(t, con, "refunds.issue", models.ProbeOutcome{Status: 500, Outcome: "error", To: models.StateUnknown,
			NextProbeAt: con.Clock.Now().Add(30 * time.Second)})
		con.Clock.Advance(30 * time.Second)
	}
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")

	signIn(t, ctx, con.URL+"/login?next=%2Freviews", "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("bulk-bar")))
	prepare := func(action string) {
		run(t, ctx, chromedp.Navigate(con.URL+"/reviews"), chromedp.WaitVisible(testID("bulk-bar")))
		for _, op := range ops {
			run(t, ctx, chromedp.Click(`[data-testid="review-row"][data-operation-id="`+op.ID+`"] `+testID("bulk-pick")))
		}
		run(t, ctx, chromedp.SetValue(testID("bulk-action"), action), chromedp.Click(testID("bulk-continue")),
			chromedp.WaitVisible(testID("bulk-apply-form")))
	}
	// The apply button's colours: [its text is the danger colour, its fill is the accent's blue].
	buttonLooks := func() []bool {
		return value(t, ctx, chromedp.Evaluate[[]bool](`(() => {
			const resolve = (v) => { const e = document.createElement('span'); e.style.color = v; document.body.append(e);
				const c = getComputedStyle(e).color; e.remove(); return c; };
			const b = getComputedStyle(document.querySelector('[data-testid="bulk-apply"]'));
			return [b.color === resolve('var(--danger)'), b.backgroundColor === resolve('var(--accent)')]; })()`))
	}

	// Asking the downstream is the safe choice: the blue button. Each row says what it does and
	// what its attempts and look-ups saw; the sum at stake is over the refunds, which name one.
	prepare(models.ActionReconcileNow)
	assert.Equal(t, []bool{false, true}, buttonLooks(), "asking is the accent's blue")
	evidence := map[string]string{}
	for _, op := range ops {
		row := `[data-testid="bulk-row"][data-operation-id="` + op.ID + `"] `
		evidence[op.Key] = value(t, ctx, chromedp.Text(row+testID("bulk-evidence")))
		assert.NotEmpty(t, value(t, ctx, chromedp.Text(row+testID("bulk-summary"))), op.Key)
	}
	assert.Equal(t, map[string]string{
		"order-7000:refund": "2 look-ups told nothing either way (HTTP 500) · 1 attempt · HTTP 504",
		"order-7001:refund": "2 look-ups told nothing either way (HTTP 500) · 1 attempt · HTTP 504",
		"order-7002:refund": "2 look-ups told nothing either way (HTTP 500) · 1 attempt · HTTP 504",
		"order-7100:ticket": "1 attempt · HTTP 504",
	}, evidence)
	assert.Equal(t, "At stake: 15.00 EUR in 3 of 4 operations; the others name no amount",
		strings.Join(strings.Fields(value(t, ctx, chromedp.Text(testID("bulk-at-stake")))), " "))

	prepare(models.ActionConfirmNotExecuted)
	run(t, ctx, chromedp.WaitVisible(testID("bulk-risk")))
	assert.Equal(t, []bool{true, false}, buttonLooks(), "the risky retry is the danger colour, not the blue of asking")
	assert.Equal(t, "2 look-ups told nothing either way (HTTP 500) · 1 attempt · HTTP 504",
		value(t, ctx, chromedp.Text(`[data-testid="bulk-row"][data-operation-id="`+ops[0].ID+`"] `+testID("bulk-evidence"))))
	assert.Equal(t, "3 of these go to refunds.issue, which cannot recognise a repeat; if the first attempt did reach it, "+
		"this sends a second refunds.issue request.", value(t, ctx, chromedp.Text(testID("bulk-risk-text"))))
	screenshot(t, ctx, "bulk-retry-confirm")

	// Without the second choice the browser does not send the form.
	run(t, ctx, chromedp.SendKeys(testID("bulk-reason"), "None of these reached the provider (its log for the outage)."),
		chromedp.Click(testID("bulk-apply")))
	assert.False(t, value(t, ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid="bulk-apply-form"]').checkValidity()`)))
	assert.Equal(t, 1, count(t, ctx, testID("bulk-apply-form")))
	for _, op := range ops {
		assert.Equal(t, models.StateUnknown, waitFor(t, con, op, models.StateUnknown).Op.State)
	}

	run(t, ctx, chromedp.Click(testID("bulk-risk-accept")), chromedp.Click(testID("bulk-apply")), chromedp.WaitVisible(testID("bulk-done")))
	assert.Equal(t, "4", value(t, ctx, chromedp.Text(testID("bulk-done"))))
	for _, op := range ops {
		waitFor(t, con, op, models.StatePending)
	}
}

// The queue refreshes itself; the bar's "all matching" count follows it, so the label says
// what "all" will take when the bar is sent.
func TestBrowserBulkAllCountFollowsTheQueue(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.SQLite, consoletest.Options{ReviewRefresh: 200 * time.Millisecond})
	seed := func(i int) *models.Operation {
		return con.Operation(t, consoletest.Seed{Tenant: "acme", Key: fmt.Sprintf("order-%d:refund", 8000+i),
			Tool: "refunds.issue", Params: fmt.Sprintf(`{"amount_cents":500,"currency":"EUR","order_id":"%d"}`, 8000+i),
			Unknown: true, Review: true})
	}
	seed(0)
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")

	signIn(t, ctx, con.URL+"/login?next=%2Freviews", "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("bulk-bar")))
	assert.Equal(t, "All 1 matching this filter", value(t, ctx, chromedp.Text(testID("bulk-all-label"))))
	seed(1)
	run(t, ctx, chromedp.WaitVisible(`[data-testid="review-list"][data-bulk-all="All 2 matching this filter"]`))
	run(t, ctx, chromedp.Poll[chromedp.Void](`document.querySelector('[data-testid="bulk-all-label"]').textContent === "All 2 matching this filter"`))
	assert.Equal(t, 2, count(t, ctx, testID("bulk-pick")))
}

// The result of a bulk "ask the downstream now" follows its operations: while the reviewer
// looks at it, a look-up finds one refund, and the page shows that row SUCCEEDED with what the
// look-up saw, says the page changed, and is not reloaded (what the reviewer scrolled to and
// the notice of the apply stay).
func TestBrowserBulkResultUpdatesItself(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.SQLite, consoletest.Options{})
	var ops []*models.Operation
	for i := range 2 {
		ops = append(ops, con.Operation(t, consoletest.Seed{Tenant: "acme", Key: fmt.Sprintf("order-%d:refund", 7400+i),
			Tool: "refunds.issue", Params: fmt.Sprintf(`{"amount_cents":%d,"currency":"EUR","order_id":"%d"}`, 2500+i, 7400+i),
			Unknown: true, Review: true}))
	}
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	signIn(t, ctx, con.URL+"/login?next=%2Freviews", "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("bulk-bar")),
		chromedp.SetValue(testID("bulk-action"), models.ActionReconcileNow),
		chromedp.Click(testID("bulk-all")),
		chromedp.Click(testID("bulk-continue")),
		chromedp.WaitVisible(testID("bulk-apply-form")),
		chromedp.SendKeys(testID("bulk-reason"), "Provider outage 4711 is over: ask again."),
		chromedp.Click(testID("bulk-apply")),
		chromedp.WaitVisible(testID("bulk-done")),
	)
	row := func(op *models.Operation, id string) string {
		return `[data-testid="bulk-row"][data-operation-id="` + op.ID + `"] ` + testID(id)
	}
	assert.Equal(t, "Outcome unknown", strings.TrimSpace(value(t, ctx, chromedp.Text(row(ops[0], "bulk-now")))))
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`))

	// The worker's look-up finds the first refund in the payment system.
	claimed, err := con.Ledger.ClaimProbes(t.Context(), "worker-1", []string{"refunds.issue"}, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.NoError(t, con.Ledger.RecordProbe(t.Context(), claimed[0], "worker-1", models.ProbeOutcome{Status: 200,
		Outcome: "found", To: models.StateSucceeded, Result: []byte(`{"id":"re_7400"}`)}))
	found, other := ops[0], ops[1]
	if claimed[0].ID != found.ID {
		found, other = other, found
	}

	run(t, ctx, chromedp.WaitVisible(testID("live-changed")))
	assert.Equal(t, "Succeeded", strings.TrimSpace(value(t, ctx, chromedp.Text(row(found, "bulk-now")))))
	assert.Equal(t, "Outcome unknown", strings.TrimSpace(value(t, ctx, chromedp.Text(row(other, "bulk-now")))))
	assert.Equal(t, "Outcome unknown", strings.TrimSpace(value(t, ctx, chromedp.Text(row(found, "bulk-selected")))), "what was decided on stays said")
	assert.Equal(t, "1 look-up: found · 1 attempt · HTTP 504", value(t, ctx, chromedp.Text(row(found, "bulk-evidence"))))
	assert.Equal(t, "Some of these operations moved on: the page shows them as they are now.",
		value(t, ctx, chromedp.Text(testID("live-changed"))))
	assert.True(t, value(t, ctx, chromedp.Evaluate[bool](`window.sameDocument === true`)), "updated in place, not reloaded")
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("notice"))), "2 done, 0 refused", "the notice of the apply stays")
}
