package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The queue can be scanned: at 1440×900 the first screen holds at least five reviews, the
// filters, saved views and bulk bar above them included.
func TestBrowserQueueFirstScreen(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.SQLite, consoletest.Options{})
	con.Tenant(t, "acme")
	con.Tenant(t, "globex")
	for i := range 8 {
		con.Operation(t, consoletest.Seed{Tenant: "acme", Key: fmt.Sprintf("order-%d:refund", 2000+i), Tool: "refunds.issue",
			Params: fmt.Sprintf(`{"amount_cents":%d,"currency":"EUR","order_id":"%d"}`, 1500+250*i, 2000+i), Unknown: true, Review: true})
	}
	pw := con.User(t, "rita@example.com", models.RoleReviewer)
	signIn(t, ctx, con.URL+"/login?next=%2Freviews", "rita@example.com", pw)
	// The sign-in lands on the queue; navigating before it has would race the form's redirect
	// (under load the redirect won and the navigation never finished).
	run(t, ctx, chromedp.WaitVisible(testID("review-table")), chromedp.EmulateViewport(1440, 900), chromedp.Reload(), chromedp.WaitVisible(testID("review-table")))
	visible := value(t, ctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll('[data-testid="review-row"]'))
		.filter((r) => r.getBoundingClientRect().bottom <= window.innerHeight).length`))
	assert.GreaterOrEqual(t, visible, 5, "reviews wholly in the first screen at 1440×900")
	rowHeight := value(t, ctx, chromedp.Evaluate[float64](`document.querySelector('[data-testid="review-row"]').getBoundingClientRect().height`))
	t.Logf("first screen at 1440×900: %d reviews, rows %.0f px high", visible, rowHeight)

	// At 1280×800 the filters stay one bar: every field and the Filter button on one line.
	run(t, ctx, chromedp.EmulateViewport(1280, 800), chromedp.Reload(), chromedp.WaitVisible(testID("review-table")))
	bottoms := value(t, ctx, chromedp.Evaluate[[]float64](`Array.from(document.querySelector('[data-testid="review-filters"]').children,
		(e) => Math.round(e.getBoundingClientRect().bottom))`))
	require.Len(t, bottoms, 6, "five filters and their buttons")
	for i, bottom := range bottoms {
		assert.InDelta(t, bottoms[0], bottom, 4, "part %d of the filters at 1280 px is on a line of its own", i+1)
	}
	assert.Zero(t, value(t, ctx, chromedp.Evaluate[int](`(() => { const f = document.querySelector('[data-testid="review-filters"]');
		return f.scrollWidth - f.clientWidth; })()`)), "the filters fit their bar at 1280 px, nothing cut off")
	visible = value(t, ctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll('[data-testid="review-row"]'))
		.filter((r) => r.getBoundingClientRect().bottom <= window.innerHeight).length`))
	t.Logf("at 1280×800: filters end at %v px, %d reviews on the first screen", bottoms, visible)
	// What is at stake is read whole on a laptop's width: no amount cut short.
	cut := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid="review-summary"]'))
		.filter((s) => s.scrollWidth > s.clientWidth).map((s) => s.textContent)`))
	assert.Empty(t, cut, "summaries cut short at 1280 px")
}

// Issue 28, item 7: the queue is scanned as a list. At 1440×900 every row is one line, 48 px
// at most, whatever it holds (an approval's count, the agent's reason, a claim, a
// compensation); at 390×844 the first review starts on the first screen, the filters folded
// above it. sort=amount puts the largest amounts first, those without one last; an order not
// offered is the default, the longest waiting first.
func TestBrowserQueueRowsAndOrder(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	con.Tenant(t, "acme")
	con.Tenant(t, "globex-holdings")
	ops := incidentRows(t, con)
	pw := con.User(t, "ada@example.com", models.RoleAdmin)
	signIn(t, ctx, con.URL+"/login?next=%2Freviews", "ada@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("review-table")), chromedp.EmulateViewport(1440, 900), chromedp.Reload(), chromedp.WaitVisible(testID("review-table")))
	heights := value(t, ctx, chromedp.Evaluate[[]float64](`Array.from(document.querySelectorAll('[data-testid="review-row"]'), (r) => r.getBoundingClientRect().height)`))
	require.Len(t, heights, 7) // three refunds, two emails, a payout, a compensation
	for i, h := range heights {
		assert.LessOrEqual(t, h, 48.0, "row %d at 1440 px", i+1)
	}
	t.Logf("rows at 1440×900: %v px", heights)
	// Why a review is open, when it is not what the state says (a ticket handed to a person),
	// is cut short with an ellipsis, never mid-letter, its whole text in its title; the row
	// stays one line. The waiting time is alone in its cell, when it was opened on hover.
	handed := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1050:ticket", Tool: "tickets.create", Params: `{"subject":"Parcel lost"}`})
	_, openErr := con.Ledger.OpenReview(t.Context(), handed, models.ReasonManual, "user:ravi@example.com")
	require.NoError(t, openErr)
	run(t, ctx, chromedp.Reload(), chromedp.WaitVisible(`[data-operation-id="`+handed.ID+`"] `+testID("review-reason")))
	reasons := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid="review-reason"]'), (e) => {
		const s = getComputedStyle(e); return [s.textOverflow, s.overflowX, s.whiteSpace, String(e.title !== ''),
			String(e.closest('[data-testid="review-row"]').getBoundingClientRect().height <= 48)].join(' '); })`))
	require.NotEmpty(t, reasons)
	for _, r := range reasons {
		assert.Equal(t, "ellipsis hidden nowrap true true", r, "a reason cut short ends in an ellipsis, on a row of one line")
	}
	ages := value(t, ctx, chromedp.Evaluate[[]int](`Array.from(document.querySelectorAll('[data-testid="review-row"] td:first-child'),
		(td) => td.querySelectorAll('time, div').length)`))
	for _, n := range ages {
		assert.Zero(t, n, "the waiting time alone, its opening time on hover")
	}

	// Rows that differ read differently: each says, on its one line, what its attempts and
	// look-ups saw. The refund's connection closed and its look-ups all got HTTP 500; the
	// email got a 504 and has no look-up.
	rec, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), ops[0].ID)
	require.NoError(t, err)
	lookups := 0
	for _, e := range rec.Events {
		if e.Type == models.EventReconcileFinished {
			lookups++
		}
	}
	require.GreaterOrEqual(t, lookups, 2)
	evidence := func(op *models.Operation) string {
		sel := `[data-testid="review-row"][data-operation-id="` + op.ID + `"] ` + testID("review-evidence")
		return value(t, ctx, chromedp.Evaluate[string](`(() => { const e = document.querySelector('`+sel+`');
			return e && e.getBoundingClientRect().width >= 100 ? e.title : 'missing or cut to nothing'; })()`))
	}
	assert.Equal(t, fmt.Sprintf("%d look-ups told nothing either way (HTTP 500) · 1 attempt · connection closed", lookups), evidence(ops[0]))
	assert.Equal(t, "1 attempt · HTTP 504", evidence(ops[3]))
	assert.Equal(t, "1 attempt · HTTP 504", value(t, ctx, chromedp.Text(`[data-operation-id="`+ops[3].ID+`"] `+testID("review-evidence"))))
	assert.Zero(t, count(t, ctx, `[data-operation-id="`+ops[5].ID+`"] `+testID("review-evidence")), "an approval not yet sent has nothing to show")

	summaries := func() []string {
		return value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid="review-row"]'),
			(r) => r.querySelector('[data-testid="review-summary"]')?.textContent ?? '')`))
	}
	oldest := summaries()
	run(t, ctx, chromedp.Navigate(con.URL+"/reviews?sort=amount"), chromedp.WaitVisible(testID("review-table")))
	byAmount := summaries()
	assert.Equal(t, []string{"4,800.00 EUR for order 7702", "42.00 EUR to order 1044", "42.00 EUR to order 1044", "42.00 EUR to order 1044"}, byAmount[:4])
	assert.Equal(t, "amount", value(t, ctx, chromedp.Value(testID("filter-sort"))))
	assert.Contains(t, value(t, ctx, chromedp.AttributeValue(testID("review-list"), "data-auto-refresh")).Value, "sort=amount", "the refresh keeps the order")
	run(t, ctx, chromedp.Navigate(con.URL+"/reviews?sort=params-%3E%3E%27x%27"), chromedp.WaitVisible(testID("review-table")))
	assert.Equal(t, oldest, summaries(), "an order not offered is the default")

	run(t, ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(con.URL+"/reviews"), chromedp.WaitVisible(testID("review-table")))
	first := value(t, ctx, chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector('[data-testid="review-row"]').getBoundingClientRect();
		return [r.top, r.bottom]; })()`))
	assert.Less(t, first[1], 844.0, "the first review is whole on a phone's first screen")
	t.Logf("first review at 390×844: %.0f–%.0f px", first[0], first[1])
	screenshot(t, ctx, "phone-queue")
}
