package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// longJustification is an agent's reason of handlers.MaxJustification (2,000) characters.
func longJustification(subject string) string {
	sentence := "The supplier's invoice for " + subject + " is due today and the contract, the purchase order and the delivery note are in the shared drive; finance asked for the payment before the end of the day. "
	return strings.TrimSpace(strings.Repeat(sentence, 2000/len(sentence)+1)[:2000])
}

// While a person must decide, the decision is on the first screen, with real content above
// it: a 2,000-character justification and a look-alike. With "confirm succeeded" open on an
// UNKNOWN refund, and "approve" open on a payout awaiting approval whose look-alike panel
// shows, the submit button is inside the viewport at 1440×900 once the decision is opened
// (the test does not scroll; the page brings it into view, when opened by a click or by its
// key), ends within the first screen there and within the second at 390×844; the situation
// follows the decision as the first of the evidence; the reason shows three lines until "Show
// all" unfolds it. Both engines.
func TestBrowserDecisionOnTheFirstScreen(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := browser(t)
		con := consoletest.Start(t, d, consoletest.Options{})
		refund := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1044:refund", Tool: "refunds.issue",
			Params: `{"amount_cents":4200,"currency":"EUR","order_id":"1044"}`, Justification: longJustification("order 1044"),
			Outcome: &models.AttemptOutcome{Class: models.ErrorAmbiguous, Latency: 7 * time.Millisecond,
				Error: `Post "http://127.0.0.1:8080/sandbox/refunds": EOF`, To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous,
				ErrorMessage: `the request was sent but no answer came back: Post "http://127.0.0.1:8080/sandbox/refunds": EOF`}})
		for i := range 3 {
			if i > 0 {
				con.Clock.Advance(30 * time.Second)
			}
			probe(t, con, "refunds.issue", models.ProbeOutcome{Status: 500, Outcome: "error", To: models.StateUnknown,
				NextProbeAt: con.Clock.Now().Add(30 * time.Second)})
		}
		_, err := con.Ledger.OpenReview(t.Context(), refund, models.ReasonUnknownOutcome, "worker:demo-worker")
		require.NoError(t, err)
		// The refund's look-alike: the same params under another key.
		con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1044:refund-again", Tool: "refunds.issue",
			Params: `{"amount_cents":4200,"currency":"EUR","order_id":"1044"}`})
		// A payout to a card that another payout, a minute older, pays the same sum.
		con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7702:payout", Tool: "payouts.card",
			Params: `{"amount_cents":125000,"card_number":"4000056655665556","currency":"EUR","order_id":"7702"}`, NeedsApproval: true})
		con.Clock.Advance(time.Minute)
		payout := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7703:payout", Tool: "payouts.card",
			Params: `{"amount_cents":125000,"card_number":"4000056655665556","currency":"EUR","order_id":"7703"}`, NeedsApproval: true,
			Justification: longJustification("order 7703")})
		pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
		signIn(t, ctx, con.URL+"/", "rita@example.com", pw)
		run(t, ctx, chromedp.WaitVisible(testID("state-counts")))
		for _, vp := range []struct {
			w, h    int64
			screens float64
		}{{1440, 900, 1}, {390, 844, 2}} {
			run(t, ctx, chromedp.EmulateViewport(vp.w, vp.h))
			for _, c := range []struct{ id, action, key string }{{refund.ID, models.ActionConfirmSucceeded, "s"}, {payout.ID, models.ActionApprove, "a"}} {
				run(t, ctx, chromedp.Navigate(con.URL+"/operations/"+c.id), chromedp.WaitVisible(testID("action-panel")))
				require.Len(t, value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(
					'[data-testid="lookalikes"], [data-testid="operation-justification"]'), (e) => e.getAttribute('data-testid'))`)), 2,
					"the page shows the justification and the look-alike panel")
				// Open the decision as a person does: a click on its summary, the page at its top.
				run(t, ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`),
					chromedp.Click(testID("action-open-"+c.action)), chromedp.WaitVisible(testID("action-submit-"+c.action)),
					chromedp.Sleep(300*time.Millisecond)) // a smooth scroll, if the browser makes one, ends
				rect := value(t, ctx, chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector('[data-testid="action-submit-`+c.action+`"]').getBoundingClientRect();
					return [r.top, r.bottom, scrollY, innerHeight]; })()`))
				top, bottom, scrolled, height := rect[0], rect[1], rect[2], rect[3]
				t.Logf("%s %d×%d, %s open: its submit spans %.0f–%.0f px of the viewport, %.0f px scrolled; it ends at %.0f px of the page",
					d, vp.w, vp.h, c.action, top, bottom, scrolled, bottom+scrolled)
				assert.True(t, top >= 0 && bottom <= height, "%d×%d %s: the submit inside the viewport once opened (%.0f–%.0f of %.0f)",
					vp.w, vp.h, c.action, top, bottom, height)
				assert.LessOrEqual(t, bottom+scrolled, vp.screens*float64(vp.h), "%d×%d %s: the submit within %v screen(s)", vp.w, vp.h, c.action, vp.screens)
				order := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(
					'[data-testid="action-panel"], [data-testid="situation"]'), (e) => e.getAttribute('data-testid'))`))
				assert.Equal(t, []string{"action-panel", "situation"}, order, "the decision first, then the situation")
				screenshot(t, ctx, fmt.Sprintf("decision-%s-%s-%d", d, c.action, vp.w))

				// Opened by its key, the page at its top, the decision is brought into view too,
				// its first box focused.
				run(t, ctx, chromedp.Navigate(con.URL+"/operations/"+c.id), chromedp.WaitVisible(testID("action-panel")),
					chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`), chromedp.KeyEvent(c.key),
					chromedp.WaitVisible(testID("action-submit-"+c.action)), chromedp.Sleep(300*time.Millisecond))
				byKey := value(t, ctx, chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector('[data-testid="action-submit-`+c.action+`"]').getBoundingClientRect();
					return [r.top, r.bottom, innerHeight, document.activeElement.matches('[data-testid="action-form-`+c.action+`"] :is(input[type=text], textarea)') ? 1 : 0]; })()`))
				assert.True(t, byKey[0] >= 0 && byKey[1] <= byKey[2], "%d×%d %s opened by its key: the submit inside the viewport (%.0f–%.0f of %.0f)",
					vp.w, vp.h, c.action, byKey[0], byKey[1], byKey[2])
				assert.Equal(t, 1.0, byKey[3], "%d×%d %s opened by its key: its first box focused", vp.w, vp.h, c.action)
			}
		}

		// The reason is folded to three lines; "Show all" (a label: no script needed) unfolds it.
		run(t, ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(con.URL+"/operations/"+payout.ID), chromedp.WaitVisible(testID("justification-toggle")))
		height := func() float64 {
			return value(t, ctx, chromedp.Evaluate[float64](`document.querySelector('[data-testid="justification-text"]').getBoundingClientRect().height`))
		}
		folded := height()
		assert.Equal(t, "Show all 2,000 characters", words(value(t, ctx, chromedp.Text(testID("justification-toggle")))))
		run(t, ctx, chromedp.Click(testID("justification-toggle")))
		unfolded := height()
		t.Logf("the reason at 390×844: %.0f px folded, %.0f px unfolded", folded, unfolded)
		assert.Less(t, folded, 100.0, "three lines")
		assert.Greater(t, unfolded, 8*folded, "all of it")
		assert.Equal(t, "Show less", words(value(t, ctx, chromedp.Text(testID("justification-toggle")))))
	})
}
