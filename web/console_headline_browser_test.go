package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
)

// Issue 28, "Done when": at 1440×900 and at 390×844 an operation page leads with what is at
// stake. On a payout awaiting approval, an escalated refund and an email whose outcome is
// unknown, the page's one heading is the tool's summary with the formatted amount, whole on
// the first screen, above the situation and the decisions, and the decision that moves money
// names the amount on its button.
func TestBrowserHeadlineAtBothWidths(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	payout := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7702:payout", Tool: "payouts.dual",
		Params: `{"amount_cents":480000,"currency":"EUR","order_id":"7702"}`, NeedsApproval: true,
		Justification: "The supplier's invoice 7702 is due today."})
	refund := escalatedRefund(t, con, "acme", "order-1044:refund", 3)
	email := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "reset:maria", Tool: "email.send",
		Params: `{"to":"maria.rossi@example.com","subject":"Reset your password","body":"…"}`, Unknown: true, Review: true})
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	pages := []struct {
		name     string
		op       *models.Operation
		headline string
		button   [2]string // a decision's data-action and the words its button starts with
	}{
		{"approval", payout, "4,800.00 EUR for order 7702", [2]string{models.ActionApprove, "Approve 4,800.00 EUR"}},
		{"escalated refund", refund, "42.00 EUR to order 1044", [2]string{models.ActionConfirmNotExecuted, "Retry 42.00 EUR"}},
		{"unknown email", email, "To maria.rossi@example.com: Reset your password", [2]string{}},
	}

	signIn(t, ctx, con.URL+"/", "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("state-counts")))
	for _, size := range [][2]int64{{1440, 900}, {390, 844}} {
		run(t, ctx, chromedp.EmulateViewport(size[0], size[1]))
		for _, p := range pages {
			at := fmt.Sprintf("%s at %d×%d", p.name, size[0], size[1])
			run(t, ctx, chromedp.Navigate(con.URL+"/operations/"+p.op.ID), chromedp.WaitVisible(testID("operation-headline")))
			assert.Equal(t, p.headline, words(value(t, ctx, chromedp.Text(testID("operation-headline")))), at)
			// The headline is the page's heading, whole on the first screen, before the
			// situation and the decisions, and no wider than the window.
			got := value(t, ctx, chromedp.Evaluate[[]string](`(() => {
				const h = document.querySelector('[data-testid="operation-headline"]'), r = h.getBoundingClientRect();
				const situation = document.querySelector('[data-testid="situation"]');
				return [h.tagName, String(document.querySelectorAll('h1').length),
					String(r.top >= 0 && r.bottom <= window.innerHeight), String(r.right <= document.documentElement.clientWidth),
					String(!!(h.compareDocumentPosition(situation) & Node.DOCUMENT_POSITION_FOLLOWING))]; })()`))
			assert.Equal(t, []string{"H1", "1", "true", "true", "true"}, got,
				"%s: [tag, h1s, wholly on the first screen, within the width, before the situation]", at)
			top := value(t, ctx, chromedp.Evaluate[float64](`document.querySelector('[data-testid="operation-headline"]').getBoundingClientRect().top`))
			t.Logf("%s: headline at %.0f px", at, top)
			if p.button[0] == "" {
				continue
			}
			run(t, ctx, chromedp.Click(testID("action-open-"+p.button[0])), chromedp.WaitVisible(testID("action-submit-"+p.button[0])))
			button := words(value(t, ctx, chromedp.Text(testID("action-submit-"+p.button[0]))))
			assert.Regexp(t, "^"+p.button[1], button, "%s: the decision's button names the amount", at)
		}
	}
}
