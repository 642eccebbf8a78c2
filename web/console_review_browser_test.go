package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The review flows of docs/CONSOLE.md in a real browser: resolving an UNKNOWN operation from the
// queue, approval by two distinct reviewers, and a compensation approved under four eyes.
// Every decision goes through the real form; what the person sees is checked on the page,
// and what changed is checked in the ledger and at the downstream.

// decisionRow is the selector of a person's decision on the timeline.
const decisionRow = `[data-testid="timeline-entry"][data-kind="decision"]`

// stateBadge is the selector of the operation page's state, in its header.
var stateBadge = `[data-testid="operation"] ` + testID("state-badge")

// newTab opens another tab of the same browser, signed in as the same person: the second
// window someone leaves open on a page.
func newTab(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	return tab
}

// pauseLive stops the operation page's live check in a tab, as a tab that is offline or
// between its checks: the stale-tab tests need a page that does not show itself again.
var pauseLive = chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-live-src]')?.removeAttribute('data-live-src')`)

// otherPerson opens a tab in a browser context of its own (cookies and all), for a second
// reviewer at another desk. ctx must have run an action already.
func otherPerson(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	other, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	return other
}

// decide unfolds action's form on the operation page, types the reason (and any other
// fields, by data-testid), sends it with a click, and waits for the notice of the page that
// answers.
func decide(t *testing.T, ctx context.Context, action, reason string, fields ...[2]string) {
	t.Helper()
	steps := []chromedp.Action[chromedp.Void]{
		chromedp.Click(testID("action-open-" + action)),
		chromedp.WaitVisible(testID("action-reason-" + action)),
	}
	for _, f := range fields {
		steps = append(steps, chromedp.SendKeys(testID(f[0]), f[1]))
	}
	steps = append(steps, chromedp.SendKeys(testID("action-reason-"+action), reason),
		dropNotices,
		chromedp.Click(testID("action-submit-"+action)),
		chromedp.WaitVisible(testID("notice")))
	run(t, ctx, steps...)
}

// dropNotices removes the notices of the page, so that waiting for one waits for the next
// page's.
var dropNotices = chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('[data-testid="notice"]').forEach((n) => n.remove())`)

// doubleClick clicks the middle of sel twice in quick succession, as an impatient person
// does: two presses and releases with no round trip to the page in between.
func doubleClick(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	xy := value(t, ctx, chromedp.Evaluate[[]float64](`(() => { const b = document.querySelector('`+sel+`');
		b.scrollIntoView({block: 'center'}); const r = b.getBoundingClientRect();
		return [r.x + r.width / 2, r.y + r.height / 2]; })()`))
	require.Len(t, xy, 2)
	run(t, ctx, chromedp.MouseClickXY(xy[0], xy[1]), chromedp.MouseClickXY(xy[0], xy[1], chromedp.ClickCount(2)))
}

// count is the number of elements matching sel on the page.
func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	return value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('`+sel+`').length`))
}

// waitFor polls the ledger until op is in state, and returns its record then.
func waitFor(t *testing.T, con *consoletest.Console, op *models.Operation, state models.State) *models.OperationRecord {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		rec, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), op.ID)
		require.NoError(t, err)
		if rec.Op.State == state {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s, not %s, after 15 s", op.Key, rec.Op.State, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A reviewer finds an UNKNOWN refund in the queue, confirms it succeeded with the
// downstream's reference through the real form, clicking twice in haste, and sees it
// SUCCEEDED with the decision on its timeline, applied once. The same form sent again from a
// tab left open on the old page is refused, and changes nothing.
func TestBrowserConfirmSucceededFromQueue(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	refund := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1044:refund", Tool: "refunds.issue",
		Params: `{"amount_cents":4200,"currency":"EUR","order_id":"1044"}`, Unknown: true, Review: true})
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	const reason = "R-5001 is in the provider's dashboard."
	page := con.URL + "/operations/" + refund.ID

	signIn(t, ctx, con.URL+"/login?next=%2Freviews", "rita@example.com", pw)
	row := `[data-testid="review-row"][data-operation-id="` + refund.ID + `"]`
	run(t, ctx, chromedp.WaitVisible(row))
	assert.Equal(t, "Unknown", value(t, ctx, chromedp.Text(row+" "+testID("state-badge"))), "the queue says it in a word")
	assert.Equal(t, "UNKNOWN: Outcome unknown", value(t, ctx, chromedp.AttributeValue(row+" "+testID("state-badge"), "title")).Value)
	run(t, ctx,
		chromedp.Click(row+" "+testID("review-operation-link")),
		chromedp.WaitVisible(testID("action-panel")),
	)
	assert.Equal(t, page, value(t, ctx, chromedp.Location()))
	assert.Equal(t, "Outcome unknown", value(t, ctx, chromedp.Text(stateBadge)))
	assert.Zero(t, count(t, ctx, decisionRow))
	entries := count(t, ctx, testID("timeline-entry"))

	// The same page in a second tab, left open while the first decides.
	stale := newTab(t, ctx)
	run(t, stale, chromedp.Navigate(page), chromedp.WaitVisible(testID("action-panel")), pauseLive)

	run(t, ctx,
		chromedp.Click(testID("action-open-confirm_succeeded")),
		chromedp.WaitVisible(testID("action-reference-confirm_succeeded")),
		chromedp.SendKeys(testID("action-reference-confirm_succeeded"), "R-5001"),
		chromedp.SendKeys(testID("action-result-confirm_succeeded"), `{"id":"R-5001"}`),
		chromedp.SendKeys(testID("action-reason-confirm_succeeded"), reason),
	)
	// Count the submissions, and those that go ahead (the console's submit-once script stops the
	// others), in sessionStorage, which outlives the page.
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`document.addEventListener('submit', (e) => {
		const add = (k) => sessionStorage.setItem(k, String(Number(sessionStorage.getItem(k)) + 1));
		add('submits'); if (!e.defaultPrevented) add('sent'); })`))
	doubleClick(t, ctx, testID("action-submit-confirm_succeeded"))
	run(t, ctx, chromedp.WaitVisible(testID("notice")))
	submits := value(t, ctx, chromedp.Evaluate[[]string](`[sessionStorage.getItem('submits'), sessionStorage.getItem('sent')]`))
	assert.Equal(t, []string{"2", "1"}, submits, "two clicks, one form sent")
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("notice"))), "Recorded as SUCCEEDED with downstream reference R-5001.",
		"the outcome of the first click, not the refusal of a second")
	assert.Equal(t, "Succeeded", value(t, ctx, chromedp.Text(stateBadge)))
	assert.Equal(t, "R-5001", value(t, ctx, chromedp.Text(testID("downstream-ref"))))
	assert.Equal(t, page, value(t, ctx, chromedp.Location()), "back on the operation (post/redirect/get)")
	assert.Equal(t, 1, count(t, ctx, decisionRow), "one decision on the timeline")
	assert.Greater(t, count(t, ctx, testID("timeline-entry")), entries)
	assert.Contains(t, value(t, ctx, chromedp.Text(decisionRow)), reason)
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("result-json"))), `"R-5001"`)

	rec, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), refund.ID)
	require.NoError(t, err)
	require.Equal(t, models.StateSucceeded, rec.Op.State)
	require.NotNil(t, rec.Op.DownstreamRef)
	assert.Equal(t, "R-5001", *rec.Op.DownstreamRef)
	assert.Equal(t, []string{"user:rita@example.com confirm_succeeded"}, reviewActions(rec))
	assert.Equal(t, []string{"user:rita@example.com review.confirm_succeeded ok"}, audits(rec), "one post reached the server")

	// The tab left open still offers the forms of an UNKNOWN operation; sending one is refused.
	decide(t, stale, models.ActionConfirmSucceeded, "Found it too.", [2]string{"action-reference-confirm_succeeded", "R-9999"})
	notice := value(t, stale, chromedp.Text(testID("notice")))
	assert.Contains(t, notice, "Nothing was changed.")
	assert.Contains(t, notice, "it is SUCCEEDED now, not UNKNOWN")
	assert.Equal(t, "Succeeded", value(t, stale, chromedp.Text(stateBadge)))
	assert.Zero(t, count(t, stale, testID("action")), "no forms on a SUCCEEDED refund")
	rec, err = con.Ledger.OperationRecord(t.Context(), models.AllTenants(), refund.ID)
	require.NoError(t, err)
	assert.Equal(t, "R-5001", *rec.Op.DownstreamRef)
	assert.Equal(t, []string{"user:rita@example.com confirm_succeeded"}, reviewActions(rec), "applied once")

	run(t, ctx, chromedp.Click(testID("nav-reviews")), chromedp.WaitVisible(testID("reviews-empty")))
}

// Approvals by distinct reviewers, at two desks: Rita and Ravi, each in a browser of their
// own, against a console whose approved operations really run at the sandbox downstream.
func TestBrowserApprovals(t *testing.T) {
	t.Parallel()
	rita := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{Downstream: true})
	con.Tenant(t, "acme")
	ritaPW := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	raviPW := con.User(t, "ravi@example.com", models.RoleReviewer)
	signIn(t, rita, con.URL+"/", "rita@example.com", ritaPW)
	run(t, rita, chromedp.WaitVisible(testID("state-counts")))
	ravi := otherPerson(t, rita)
	signIn(t, ravi, con.URL+"/", "ravi@example.com", raviPW)
	run(t, ravi, chromedp.WaitVisible(testID("state-counts")))

	// Rita approves and sees 1 of 2; she is not offered approve again, and the approve form
	// of a tab she left open is refused; Ravi approves, and the payout runs once.
	t.Run("a payout needing two approvals runs after two distinct reviewers", func(t *testing.T) {
		payout := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "payout-7", Tool: "payouts.dual",
			Params: `{"amount_cents":250000,"currency":"EUR","order_id":"7"}`, NeedsApproval: true})
		page := con.URL + "/operations/" + payout.ID

		run(t, rita, chromedp.Navigate(page), chromedp.WaitVisible(testID("approvals")))
		assert.Equal(t, "Awaiting approval", value(t, rita, chromedp.Text(stateBadge)))
		assert.Equal(t, "0 of 2 approvals", value(t, rita, chromedp.Text(testID("approvals-count"))))
		stale := newTab(t, rita)
		run(t, stale, chromedp.Navigate(page), chromedp.WaitVisible(testID("action-open-approve")), pauseLive)

		decide(t, rita, models.ActionApprove, "Order and amount match.")
		assert.Contains(t, value(t, rita, chromedp.Text(testID("notice"))), "Approval recorded: 1 of 2.")
		assert.Equal(t, "1 of 2 approvals", value(t, rita, chromedp.Text(testID("approvals-count"))))
		assert.Equal(t, "rita@example.com", value(t, rita, chromedp.Text(testID("approvers"))))
		assert.Contains(t, value(t, rita, chromedp.Text(testID("approval-note"))), "You have approved it.")
		assert.Zero(t, count(t, rita, testID("action-open-approve")), "approve is not offered to who approved")
		assert.Equal(t, "Awaiting approval", value(t, rita, chromedp.Text(stateBadge)))

		decide(t, stale, models.ActionApprove, "Approve again.")
		assert.Contains(t, value(t, stale, chromedp.Text(testID("notice"))), "has already approved this operation")
		assert.Equal(t, "1 of 2 approvals", value(t, stale, chromedp.Text(testID("approvals-count"))), "the count is unchanged")
		assert.Equal(t, "Awaiting approval", value(t, stale, chromedp.Text(stateBadge)))
		rec := waitFor(t, con, payout, models.StateAwaitingApproval)
		assert.Equal(t, []string{"user:rita@example.com approve"}, reviewActions(rec))
		assert.Zero(t, con.Sandbox.Committed("refunds"))

		run(t, ravi, chromedp.Navigate(page), chromedp.WaitVisible(testID("action-open-approve")))
		assert.Equal(t, "1 of 2 approvals", value(t, ravi, chromedp.Text(testID("approvals-count"))))
		decide(t, ravi, models.ActionApprove, "Checked: it matches.")
		assert.Contains(t, value(t, ravi, chromedp.Text(testID("notice"))), "Approved (2 of 2).")

		rec = waitFor(t, con, payout, models.StateSucceeded)
		assert.Equal(t, []string{"user:rita@example.com approve", "user:ravi@example.com approve"}, reviewActions(rec))
		assert.Equal(t, 1, con.Sandbox.Committed("refunds"), "the payout ran once")
		run(t, ravi, chromedp.Reload(), chromedp.WaitVisible(stateBadge))
		assert.Equal(t, "Succeeded", value(t, ravi, chromedp.Text(stateBadge)))
	})

	// Four eyes: Rita proposes the compensation of a ticket, is not offered approve, and her
	// approve post is refused; Ravi approves it, and the ticket is closed at the downstream
	// exactly once.
	t.Run("a compensation runs once after another reviewer than its proposer approves", func(t *testing.T) {
		ticket := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1042:ticket", Tool: "tickets.create",
			Params: `{"subject":"Refund for order 1042"}`})
		waitFor(t, con, ticket, models.StateSucceeded)
		require.Equal(t, 1, con.Sandbox.Committed("tickets"))

		run(t, rita, chromedp.Navigate(con.URL+"/operations/"+ticket.ID), chromedp.WaitVisible(testID("action-open-propose_compensation")))
		decide(t, rita, "propose_compensation", "Customer withdrew it.")
		assert.Contains(t, value(t, rita, chromedp.Text(testID("notice"))), "Compensation proposed.")
		rec := waitFor(t, con, ticket, models.StateSucceeded)
		require.NotNil(t, rec.CompensatedBy)
		comp := rec.CompensatedBy
		page := con.URL + "/operations/" + comp.ID
		assert.Equal(t, page, value(t, rita, chromedp.Location()), "on the new compensation")
		assert.Equal(t, "compensate:"+ticket.ID, value(t, rita, chromedp.Text(testID("operation-key"))))
		assert.Equal(t, "Awaiting approval", value(t, rita, chromedp.Text(stateBadge)))
		assert.Contains(t, value(t, rita, chromedp.Text(testID("approval-note"))), "You proposed this compensation")
		assert.Zero(t, count(t, rita, testID("action-open-approve")), "approve is not offered to the proposer")

		// Rita approves anyway, with a post of her own: her reject form sent to approve.
		run(t, rita, dropNotices, chromedp.Evaluate[chromedp.Void](`(() => { const f = document.querySelector('[data-testid="action-form-reject"]');
			f.action = f.action.replace(/reject$/, 'approve'); f.elements.reason.value = 'My own proposal.'; f.submit(); })()`))
		run(t, rita, chromedp.WaitVisible(testID("notice")))
		notice := value(t, rita, chromedp.Text(testID("notice")))
		assert.Contains(t, notice, "Nothing was changed.")
		assert.Contains(t, notice, "Four eyes")
		assert.Equal(t, "Awaiting approval", value(t, rita, chromedp.Text(stateBadge)))
		assert.Equal(t, "0 of 1 approvals", value(t, rita, chromedp.Text(testID("approvals-count"))))
		assert.Empty(t, reviewActions(waitFor(t, con, comp, models.StateAwaitingApproval)))
		assert.Zero(t, con.Sandbox.Committed("closes"))

		run(t, ravi, chromedp.Navigate(page), chromedp.WaitVisible(testID("action-open-approve")))
		assert.Contains(t, value(t, ravi, chromedp.Text(testID("proposer"))), "rita@example.com")
		decide(t, ravi, models.ActionApprove, "Agreed: withdrawn.")
		assert.Contains(t, value(t, ravi, chromedp.Text(testID("notice"))), "Approved (1 of 1).")

		waitFor(t, con, comp, models.StateSucceeded)
		run(t, ravi, chromedp.Reload(), chromedp.WaitVisible(stateBadge))
		assert.Equal(t, "Succeeded", value(t, ravi, chromedp.Text(stateBadge)))
		run(t, ravi, chromedp.Navigate(con.URL+"/operations/"+ticket.ID), chromedp.WaitVisible(testID("compensated-by")))
		assert.Equal(t, "Succeeded", value(t, ravi, chromedp.Text(testID("compensated-by")+" "+testID("state-badge"))))
		assert.Equal(t, 1, con.Sandbox.Committed("closes"), "the compensation ran once")
		assert.Equal(t, 1, con.Sandbox.Committed("tickets"))
	})
}
