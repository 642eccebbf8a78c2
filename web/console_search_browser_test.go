package web_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rowIDs reads the operation ids of the rows listed under the element with testid list.
func rowIDs(t *testing.T, ctx context.Context, list string) []string {
	t.Helper()
	return value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('`+testID(list)+
		` [data-operation-id]')).map((r) => r.dataset.operationId)`))
}

// leaving marks the page the browser shows, and left waits until that page is gone: the next
// page has the same elements, so waiting for them alone could read the old one.
func leaving() chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`document.body.dataset.left = 'yes'`)
}

func left() chromedp.Action[chromedp.Void] { return chromedp.WaitNotPresent(`body[data-left]`) }

// Issue #19 items 1 and 2: an admin of every tenant finds operations by a key's middle and by a
// param's value, is refused a search by a sensitive param, saves the param search as a view,
// and a reviewer limited to one tenant opening its link sees only that tenant's operations. A
// view saved on the queue filters it when opened.
func TestBrowserSearchAndSavedViews(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	ours := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1042:refund", Tool: "refunds.issue",
		Params:  `{"amount_cents":1999,"card_number":"` + cardNumber + `","currency":"EUR","order_id":"1042"}`,
		Unknown: true, Review: true})
	other := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "Order-1043:Refund", Tool: "refunds.issue",
		Params: `{"amount_cents":500,"currency":"EUR","order_id":"1043"}`, Unknown: true})
	theirs := con.Operation(t, consoletest.Seed{Tenant: "globex", Key: "gx-1042:ticket", Tool: "tickets.create",
		Params: `{"order_id":1042,"subject":"Where is my refund?"}`, Unknown: true, Review: true})
	annPW := con.User(t, "ann@example.com", models.RoleAdmin)
	ritaPW := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	ann, err := con.Ledger.UserByEmail(t.Context(), "ann@example.com")
	require.NoError(t, err)

	search := func(field, text string) {
		t.Helper()
		run(t, ctx, chromedp.Navigate(con.URL+"/operations"), chromedp.WaitVisible(testID("search-form")),
			chromedp.SendKeys(testID(field), text), leaving(), chromedp.Click(testID("search-submit")),
			left(), chromedp.WaitVisible(testID("saved-views")))
	}
	signIn(t, ctx, con.URL+"/", "ann@example.com", annPW)
	run(t, ctx, chromedp.WaitVisible(testID("state-counts")))

	search("search-key", "1043:REF")
	assert.Equal(t, []string{other.ID}, rowIDs(t, ctx, "search-results"), "the key's middle, in another case")
	assert.Equal(t, "1", value(t, ctx, chromedp.Text(testID("operation-attempts"))))
	assert.Equal(t, models.ErrorAmbiguous, value(t, ctx, chromedp.Text(testID("operation-error-class"))))

	search("search-param", "card_number = "+cardNumber)
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("notice"))), "sensitive param")
	assert.Empty(t, rowIDs(t, ctx, "search-results"), "nothing is listed for a sensitive param")

	search("search-param", "order_id = 1042")
	assert.Equal(t, []string{theirs.ID, ours.ID}, rowIDs(t, ctx, "search-results"), "the string and the number 1042, in both tenants")
	run(t, ctx, chromedp.SendKeys(testID("save-view-name"), "Order 1042"), chromedp.Click(testID("save-view-submit")),
		chromedp.WaitVisible(testID("saved-view-link")))
	assert.Contains(t, value(t, ctx, chromedp.Text(testID("notice"))), "Saved “Order 1042”")
	assert.Equal(t, []string{theirs.ID, ours.ID}, rowIDs(t, ctx, "search-results"), "back on the same search (PRG)")
	saved, err := con.Ledger.SavedViews(t.Context(), ann.ID, models.ViewPageOperations)
	require.NoError(t, err)
	require.Len(t, saved, 1, "the view is in the ledger, Ann's")
	assert.Equal(t, "param=order_id+%3D+1042", saved[0].Query)
	link := value(t, ctx, chromedp.Evaluate[string](`document.querySelector('`+testID("saved-view-link")+`').href`))
	assert.Equal(t, con.URL+"/views/"+saved[0].ID, link)

	// On the queue: a view of the refunds' reviews.
	run(t, ctx, chromedp.Navigate(con.URL+"/reviews?tool=refunds.issue"), chromedp.WaitVisible(testID("review-table")),
		chromedp.SendKeys(testID("save-view-name"), "Refunds"), chromedp.Click(testID("save-view-submit")),
		chromedp.WaitVisible(testID("saved-view-link")),
		chromedp.Navigate(con.URL+"/reviews"), chromedp.WaitVisible(testID("review-table")))
	assert.ElementsMatch(t, []string{ours.ID, theirs.ID}, rowIDs(t, ctx, "review-table"), "the whole queue")
	run(t, ctx, leaving(), chromedp.Click(testID("saved-view-link")), left(), chromedp.WaitVisible(testID("review-table")))
	assert.Equal(t, []string{ours.ID}, rowIDs(t, ctx, "review-table"), "the saved view filters the queue")
	assert.Equal(t, "refunds.issue", value(t, ctx, chromedp.Value(testID("filter-tool"))))

	// Rita, limited to acme, opens Ann's link: the same filter, her tenants only.
	run(t, ctx, chromedp.Click(testID("logout")), chromedp.WaitVisible(testID("login-form")))
	signIn(t, ctx, link, "rita@example.com", ritaPW)
	run(t, ctx, chromedp.WaitVisible(testID("search-results")))
	assert.Equal(t, []string{ours.ID}, rowIDs(t, ctx, "search-results"), "globex's operation is not hers to see")
	assert.Equal(t, "order_id = 1042", value(t, ctx, chromedp.Value(testID("search-param"))))
	assert.Empty(t, value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('`+testID("saved-view")+`')).map((e) => e.textContent)`)),
		"Ann's views are not listed for Rita")
	screenshot(t, ctx, "saved-view-opened")
	run(t, ctx, chromedp.EmulateViewport(390, 900), chromedp.Reload(), chromedp.WaitVisible(testID("search-results")))
	screenshot(t, ctx, "phone-search")
}
