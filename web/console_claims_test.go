package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Rita takes a review from the queue; Ravi is told she has it and cannot give it back for her;
// an auditor cannot take one; a review of another tenant is not there for Rita.
func TestReviewClaimsInTheConsole(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		op := desk.unknown(t, "acme", "order-1")
		other := desk.unknown(t, "globex", "order-2")
		page := "/operations/" + op.ID
		claim := func(b *consoletest.Browser, id, verb string) (int, string) {
			b.Get(t, "/reviews")
			p := b.Post(t, "/operations/"+id+"/"+verb, url.Values{"next": {"/operations/" + id}})
			return p.Status, p.Header.Get("Location")
		}

		status, to := claim(desk.rita, op.ID, "claim")
		require.Equal(t, http.StatusSeeOther, status)
		assert.Equal(t, page, to, "back where the form was")
		assert.Contains(t, desk.rita.Get(t, page).Body, "You have this review until")

		status, _ = claim(desk.ravi, op.ID, "claim")
		require.Equal(t, http.StatusSeeOther, status)
		assert.Contains(t, desk.ravi.Get(t, page).Body, "rita@example.com has taken this review")
		claim(desk.ravi, op.ID, "release")
		assert.Contains(t, desk.ravi.Get(t, page).Body, "only they can give it back")

		status, _ = claim(desk.aud, op.ID, "claim")
		assert.Equal(t, http.StatusForbidden, status, "auditors read, they do not take reviews")
		status, _ = claim(desk.rita, other.ID, "claim")
		assert.Equal(t, http.StatusNotFound, status, "another tenant's review is not there")

		rita, err := desk.con.Ledger.UserByEmail(t.Context(), "rita@example.com")
		require.NoError(t, err)
		items, _, err := desk.con.Ledger.ReviewQueue(t.Context(), models.AllTenants(),
			models.ReviewFilter{Claims: models.ClaimsMine, Viewer: models.Person{UserID: rita.ID, Actor: desk.ritaID}, Limit: 10})
		require.NoError(t, err)
		require.Len(t, items, 1)
		assert.Equal(t, op.ID, items[0].OperationID)

		claim(desk.rita, op.ID, "release")
		items, _, err = desk.con.Ledger.ReviewQueue(t.Context(), models.AllTenants(),
			models.ReviewFilter{Claims: models.ClaimsNone, Limit: 10})
		require.NoError(t, err)
		assert.Len(t, items, 2, "both reviews are free again")
	})
}

// In a real browser: Rita takes a review from the queue, sees it is hers, finds it under
// "Taken by me", gives it back; an approval in the queue counts down to its lapse, marked once
// within the warning time.
func TestBrowserQueueClaimsAndDeadlines(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	con.Tenant(t, "acme")
	unknown := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1", Tool: "refunds.issue",
		Params: `{"amount_cents":1999,"currency":"EUR","order_id":"1"}`, Unknown: true, Review: true})
	payout := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "payout-1", Tool: "payouts.dual",
		Params: `{"amount_cents":250000,"currency":"EUR","order_id":"1"}`, NeedsApproval: true})
	pw := con.User(t, "rita@example.com", models.RoleReviewer)
	row := func(op *models.Operation) string { return `[data-operation-id="` + op.ID + `"] ` }

	signIn(t, ctx, con.URL+"/login?next=%2Freviews", "rita@example.com", pw)
	run(t, ctx,
		chromedp.WaitVisible(testID("review-table")),
		chromedp.Click(row(unknown)+testID("review-take")),
		chromedp.WaitVisible(row(unknown)+testID("review-release")),
	)
	assert.Contains(t, value(t, ctx, chromedp.Text(row(unknown)+testID("review-claim"))), "You have it · 30 min left")
	assert.Equal(t, "lapses in 1 h", value(t, ctx, chromedp.Text(row(payout)+testID("review-lapses"))),
		"payouts.dual's approval window is an hour")
	soon := value(t, ctx, chromedp.Evaluate[bool](`document.querySelector('[data-operation-id="`+payout.ID+`"] [data-testid="review-lapses"]').classList.contains('queue__lapses--soon')`))
	assert.True(t, soon, "within the warning time (an hour), the lapse is marked")

	run(t, ctx,
		chromedp.Navigate(con.URL+"/reviews?claims=mine"),
		chromedp.WaitVisible(testID("review-table")),
	)
	rows := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="review-row"]').length`))
	assert.Equal(t, 1, rows, "only the review Rita took")
	// The queue comes back after the post: wait for the page to be replaced, not for elements
	// the old page already shows.
	run(t, ctx,
		leaving(),
		chromedp.Click(row(unknown)+testID("review-release")),
		left(),
		chromedp.WaitVisible(testID("review-filters")),
	)
	items, _, err := con.Ledger.ReviewQueue(t.Context(), models.AllTenants(), models.ReviewFilter{Claims: models.ClaimsNone, Limit: 10})
	require.NoError(t, err)
	assert.Len(t, items, 2, "given back: nobody has either review")
}
