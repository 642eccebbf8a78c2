package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
)

// While a person must decide, the decision is on the first screen: with "confirm succeeded"
// open on an UNKNOWN refund, and "approve" open on a payout awaiting approval, the submit button
// ends within the first screen at 1440×900 and within the second at 390×844; the situation
// follows the decision as the first of the evidence.
func TestBrowserDecisionOnTheFirstScreen(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	refund := escalatedRefund(t, con, "acme", "order-1044:refund", 3)
	payout := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7:payout", Tool: "payouts.dual",
		Params: `{"amount_cents":250000,"currency":"EUR","order_id":"7"}`, NeedsApproval: true,
		Justification: "The supplier's invoice 7 is due today; the contract is in the shared drive."})
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	signIn(t, ctx, con.URL+"/", "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("state-counts")))
	for _, vp := range []struct {
		w, h    int64
		screens float64
	}{{1440, 900, 1}, {390, 844, 2}} {
		run(t, ctx, chromedp.EmulateViewport(vp.w, vp.h))
		for _, c := range []struct{ id, action string }{{refund.ID, models.ActionConfirmSucceeded}, {payout.ID, models.ActionApprove}} {
			run(t, ctx, chromedp.Navigate(con.URL+"/operations/"+c.id), chromedp.WaitVisible(testID("action-panel")),
				chromedp.Click(testID("action-open-"+c.action)), chromedp.WaitVisible(testID("action-submit-"+c.action)),
				chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
			bottom := value(t, ctx, chromedp.Evaluate[float64](`document.querySelector('[data-testid="action-submit-`+c.action+`"]').getBoundingClientRect().bottom + scrollY`))
			t.Logf("%d×%d, %s open: its submit ends at %.0f px", vp.w, vp.h, c.action, bottom)
			assert.LessOrEqual(t, bottom, vp.screens*float64(vp.h), "%d×%d %s: the submit within %v screen(s)", vp.w, vp.h, c.action, vp.screens)
			order := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(
				'[data-testid="action-panel"], [data-testid="situation"]'), (e) => e.getAttribute('data-testid'))`))
			assert.Equal(t, []string{"action-panel", "situation"}, order, "the decision first, then the situation")
			screenshot(t, ctx, fmt.Sprintf("decision-%s-%d", c.action, vp.w))
		}
	}
}
