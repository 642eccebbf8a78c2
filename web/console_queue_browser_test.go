package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
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
	run(t, ctx, chromedp.EmulateViewport(1440, 900), chromedp.Navigate(con.URL+"/reviews"), chromedp.WaitVisible(testID("review-table")))
	visible := value(t, ctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll('[data-testid="review-row"]'))
		.filter((r) => r.getBoundingClientRect().bottom <= window.innerHeight).length`))
	assert.GreaterOrEqual(t, visible, 5, "reviews wholly in the first screen at 1440×900")
	rowHeight := value(t, ctx, chromedp.Evaluate[float64](`document.querySelector('[data-testid="review-row"]').getBoundingClientRect().height`))
	t.Logf("first screen at 1440×900: %d reviews, rows %.0f px high", visible, rowHeight)
}
