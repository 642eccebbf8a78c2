package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The search's answers over HTTP, on both engines: an id opens its operation (in scope only),
// a sensitive param is refused whichever tool is chosen, a saved view is posted with its CSRF
// token only, and only its owner deletes it.
func TestConsoleSearchAndViews(t *testing.T) {
	for _, d := range []models.Dialect{models.Postgres, models.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			con := consoletest.Start(t, d, consoletest.Options{})
			ours := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1:refund", Tool: "refunds.issue",
				Params: `{"amount_cents":1,"card_number":"` + cardNumber + `","currency":"EUR","order_id":"1"}`, Unknown: true})
			theirs := con.Operation(t, consoletest.Seed{Tenant: "globex", Key: "order-1:refund", Tool: "refunds.issue",
				Params: `{"amount_cents":1,"currency":"EUR","order_id":"1"}`, Unknown: true})
			rita := con.NewBrowser(t)
			rita.MustLogin(t, "rita@example.com", con.User(t, "rita@example.com", models.RoleReviewer, "acme"))
			ann := con.NewBrowser(t)
			ann.MustLogin(t, "ann@example.com", con.User(t, "ann@example.com", models.RoleAuditor))

			p := rita.Get(t, "/operations?key="+ours.ID)
			assert.Equal(t, http.StatusSeeOther, p.Status, "an id opens its operation")
			assert.Equal(t, "/operations/"+ours.ID, p.Header.Get("Location"))
			p = rita.Get(t, "/operations?key="+theirs.ID)
			assert.Equal(t, http.StatusOK, p.Status)
			assert.Empty(t, p.TestIDs("operation-row"), "another tenant's id finds nothing")
			assert.False(t, strings.Contains(p.Body, "/operations/"+theirs.ID), "nor links to it")

			// card_number is sensitive for refunds.issue: refused with that tool, and with none.
			for _, q := range []string{"param=card_number+%3D+" + cardNumber, "param=card_number%3D1&tool=refunds.issue"} {
				p = ann.Get(t, "/operations?"+q)
				assert.Equal(t, http.StatusBadRequest, p.Status, q)
				assert.True(t, strings.Contains(p.Body, "is a sensitive param of refunds.issue"), q)
				assert.Empty(t, p.TestIDs("operation-row"), q)
			}
			assert.Empty(t, p.TestIDs("save-view-form"), "a refused search is not offered for saving")
			ann.Get(t, "/operations") // a page with the form's token
			p = ann.Post(t, "/views", url.Values{"page": {"operations"}, "name": {"Cards"}, "query": {"param=card_number+%3D+" + cardNumber}})
			assert.Equal(t, http.StatusSeeOther, p.Status)
			assert.Equal(t, "/operations", p.Header.Get("Location"), "back to the page, without the card number")
			p = ann.Get(t, "/operations")
			assert.Contains(t, p.TestIDs("notice"), "Not saved: “card_number” is a sensitive param of refunds.issue: operations are never searched by it.")
			p = ann.Get(t, "/operations?param=card_number%3D1&tool=tickets.create")
			assert.Equal(t, http.StatusOK, p.Status, "a tool that does not mask it searches its own operations by it")
			p = ann.Get(t, "/operations?param=order_id+%3D+1")
			assert.ElementsMatch(t, []string{ours.ID, theirs.ID}, p.Attrs("operation-row", "data-operation-id"))
			assert.Equal(t, []string{"0.01 EUR", "0.01 EUR"}, p.TestIDs("operation-amount"), "the amount of each, from its tool's summary")

			// Saving: refused without the CSRF token, saved with it (PRG to the filter).
			form := url.Values{"page": {"operations"}, "name": {"Order 1"}, "query": {"param=order_id+%3D+1&before=op_X&csrf_token=x"}}
			refused := url.Values{"csrf_token": {""}}
			for k, v := range form {
				refused[k] = v
			}
			assert.Equal(t, http.StatusForbidden, ann.Post(t, "/views", refused).Status)
			p = ann.Post(t, "/views", form)
			require.Equal(t, http.StatusSeeOther, p.Status)
			assert.Equal(t, "/operations?param=order_id+%3D+1", p.Header.Get("Location"))
			annUser, err := con.Ledger.UserByEmail(t.Context(), "ann@example.com")
			require.NoError(t, err)
			views, err := con.Ledger.SavedViews(t.Context(), annUser.ID, models.ViewPageOperations)
			require.NoError(t, err)
			require.Len(t, views, 1, "one view saved: not the refused one, and not the one without its token")
			assert.Equal(t, "param=order_id+%3D+1", views[0].Query, "the filter alone: no cursor, no token")

			// Rita opens it and sees only acme's; she cannot delete it.
			p = rita.Get(t, "/views/"+views[0].ID)
			require.Equal(t, http.StatusSeeOther, p.Status)
			p = rita.Get(t, p.Header.Get("Location"))
			assert.Equal(t, []string{ours.ID}, p.Attrs("operation-row", "data-operation-id"))
			assert.Equal(t, http.StatusNotFound, rita.Post(t, "/views/"+views[0].ID+"/delete", nil).Status)
			_, err = con.Ledger.SavedView(t.Context(), views[0].ID)
			require.NoError(t, err, "still there")
			ann.Get(t, "/operations")
			assert.Equal(t, http.StatusSeeOther, ann.Post(t, "/views/"+views[0].ID+"/delete", nil).Status)
			_, err = con.Ledger.SavedView(t.Context(), views[0].ID)
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "deleted by its owner")
		})
	}
}
