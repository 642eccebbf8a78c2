package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reviewer resolves an UNKNOWN refund through the real form: opens "it did not take effect",
// types a reason, confirms, and sees the operation PENDING again with the decision on its
// timeline. An auditor then verifies the audit chain, which holds the decision.
func TestBrowserResolveUnknownRefund(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	refund := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1042:refund", Tool: "refunds.issue",
		Params:        `{"amount_cents":1999,"card_number":"` + cardNumber + `","currency":"EUR","order_id":"1042"}`,
		WorkflowRunID: "order-1042", StepID: "refund", Unknown: true, Review: true})
	ritaPW := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	audePW := con.User(t, "aude@example.com", models.RoleAuditor)
	header := `[data-testid="operation"] ` + testID("state-badge")
	const reason = "Checked the payment provider's dashboard: no refund for order 1042 exists."

	signIn(t, ctx, con.URL+"/operations/"+refund.ID, "rita@example.com", ritaPW)
	run(t, ctx, chromedp.WaitVisible(testID("action-panel")))
	assert.Equal(t, "Outcome unknown", value(t, ctx, chromedp.Text(header)))
	screenshot(t, ctx, "operation-actions")

	run(t, ctx,
		chromedp.Click(testID("action-open-confirm_not_executed")),
		chromedp.WaitVisible(testID("action-reason-confirm_not_executed")),
		chromedp.SendKeys(testID("action-reason-confirm_not_executed"), reason),
	)
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("action-caution-confirm_not_executed"))),
		"refunds.issue does not honour idempotency keys")
	screenshot(t, ctx, "operation-action-open")

	run(t, ctx,
		chromedp.Click(testID("action-submit-confirm_not_executed")),
		chromedp.WaitVisible(testID("notice")),
	)
	assert.Equal(t, "Pending", value(t, ctx, chromedp.Text(header)), "the page shows the new state")
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("notice"))), "Recorded as not executed.")
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("timeline"))), reason, "the reason is on the timeline")
	assert.Contains(t, value(t, ctx, chromedp.Location()), "/operations/"+refund.ID, "back on the operation (post/redirect/get)")
	rec, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), refund.ID)
	require.NoError(t, err)
	assert.Equal(t, models.StatePending, rec.Op.State)
	screenshot(t, ctx, "operation-resolved")

	run(t, ctx, chromedp.Click(testID("logout")), chromedp.WaitVisible(testID("login-form")))
	signIn(t, ctx, con.URL+"/audit", "aude@example.com", audePW)
	run(t, ctx,
		chromedp.WaitVisible(testID("audit-chain")),
		chromedp.Click(testID("audit-verify")),
		chromedp.WaitVisible(testID("notice")),
	)
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("notice"))), "The chain holds")
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("audit-table"))), "review.confirm_not_executed")
	screenshot(t, ctx, "audit")
}
