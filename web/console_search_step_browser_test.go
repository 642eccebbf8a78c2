package web_test

import (
	"net/http"
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

// Issue 51 item 4, the UNKNOWN page's order: what to search the downstream for is step 1 of the
// decision, inside its panel and above its submit (2. record what you found), on the first
// screen at 1440×900 and not repeated further down; its Copy button says what it copies. The
// queue's line says sixteen failed look-ups told nothing either way. An auditor, who cannot
// decide, finds what to search for in the situation. Both engines.
func TestBrowserSearchIsTheDecisionsFirstStep(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := browser(t)
		desk := newReviewDesk(t, d, consoletest.Options{})
		con := desk.con
		refund := escalatedRefund(t, con, "acme", "order-1044:refund", 16)
		rec, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), refund.ID)
		require.NoError(t, err)
		dk := rec.Op.DownstreamKeySent()
		require.NotEmpty(t, dk)
		pw := con.User(t, "rosa@example.com", models.RoleReviewer, "acme")

		// The queue: what the look-ups saw, in words that are no verdict.
		signIn(t, ctx, con.URL+"/reviews", "rosa@example.com", pw)
		run(t, ctx, chromedp.EmulateViewport(1440, 900), chromedp.WaitVisible(testID("review-table")))
		evidence := `[data-testid="review-row"][data-operation-id="` + refund.ID + `"] ` + testID("review-evidence")
		assert.Equal(t, "16 look-ups told nothing either way (HTTP 500) · 1 attempt · connection closed",
			value(t, ctx, chromedp.AttributeValue(evidence, "title")).Value)
		assert.NotContains(t, value(t, ctx, chromedp.Text(testID("review-table"))), "all HTTP 500")

		// The operation page: 1. search the downstream for the key, 2. record what was found.
		run(t, ctx, chromedp.Navigate(con.URL+"/operations/"+refund.ID), chromedp.WaitVisible(testID("decision-search")))
		steps := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(
			'[data-testid="action-panel"] ol[data-testid="decision-steps"] > li'), (li) => li.getAttribute('data-testid') + ' ' + getComputedStyle(li).listStyleType)`))
		assert.Equal(t, []string{"decision-search decimal", "decision-choose decimal"}, steps, "two numbered steps inside the decision panel, the search first")
		assert.Equal(t, "Search the downstream for "+dk+" Copy Look it up in the refunds service ↗",
			words(value(t, ctx, chromedp.Text(testID("decision-search")))))
		assert.Equal(t, "Record what you found:", words(value(t, ctx, chromedp.Text(testID("decision-choose")+" > .decision-step__label"))))
		assert.Equal(t, 4, count(t, ctx, testID("decision-choose")+` [data-testid="action"]`), "the choices are step 2")
		assert.Equal(t, "Nobody knows whether it took effect.", value(t, ctx, chromedp.Text(testID("actions-intro"))))
		// Once on the page: the situation below the decision does not repeat it.
		assert.Equal(t, 1, count(t, ctx, testID("situation-reference")))
		assert.Equal(t, 1, count(t, ctx, testID("copy-reference")))
		assert.Equal(t, 1, count(t, ctx, testID("decision-search")+" "+testID("copy-reference")))
		assert.NotContains(t, value(t, ctx, chromedp.Text(testID("situation"))), "Search the downstream")
		assert.Contains(t, value(t, ctx, chromedp.Text(testID("situation-reconcile"))), "16 look-ups, all HTTP 500, which told nothing either way")
		assert.Equal(t, "Copy the downstream key", value(t, ctx, chromedp.AttributeValue(testID("copy-reference"), "aria-label")).Value)

		// Opened, the decision keeps its first step above its submit, both on the first screen.
		run(t, ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`),
			chromedp.Click(testID("action-open-"+models.ActionConfirmSucceeded)),
			chromedp.WaitVisible(testID("action-submit-"+models.ActionConfirmSucceeded)), chromedp.Sleep(300*time.Millisecond))
		rect := value(t, ctx, chromedp.Evaluate[[]float64](`(() => {
			const s = document.querySelector('[data-testid="decision-search"]').getBoundingClientRect();
			const b = document.querySelector('[data-testid="action-submit-confirm_succeeded"]').getBoundingClientRect();
			return [s.top, s.bottom, b.top, b.bottom, innerHeight, scrollY]; })()`))
		t.Logf("%s 1440×900: the search step spans %.0f–%.0f px, the submit %.0f–%.0f px of the page", d,
			rect[0]+rect[5], rect[1]+rect[5], rect[2]+rect[5], rect[3]+rect[5])
		assert.True(t, rect[0] >= 0 && rect[1] <= rect[2], "the search step above the submit, in view (%v)", rect)
		assert.LessOrEqual(t, rect[3], rect[4], "the submit on the first screen")

		run(t, ctx, chromedp.Click(testID("copy-reference")),
			chromedp.Poll[chromedp.Void](`document.querySelector('[data-testid="copy-reference"]').textContent === 'Copied'`))

		// An auditor cannot decide: what to search for stays in the situation.
		p := desk.aud.Get(t, "/operations/"+refund.ID)
		require.Equal(t, http.StatusOK, p.Status)
		assert.Empty(t, p.TestIDs("decision-search"))
		assert.Equal(t, []string{dk}, p.TestIDs("situation-reference"))
		assert.True(t, strings.Contains(p.Body, "Search the downstream for"))
	})
}
