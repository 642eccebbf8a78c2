package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The same 2,500.00 EUR payout for order 7, sent under a second key, is shown as a look-alike on
// both operations' pages (with who approved the other), marked in the queue, and named by a bulk
// approval that includes both; a payout for another order is none of these. Both engines.
func TestLookAlikesShownToReviewers(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		payout := func(key, order string) *models.Operation {
			return desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: key, Tool: "payouts.dual",
				Params: `{"amount_cents":250000,"currency":"EUR","order_id":"` + order + `"}`, NeedsApproval: true})
		}
		first, second, other := payout("payout-7", "7"), payout("payout-7-again", "7"), payout("payout-8", "8")
		page := desk.ravi.Get(t, "/operations/"+first.ID)
		require.Equal(t, http.StatusOK, page.Status)
		require.Equal(t, http.StatusSeeOther, act(t, desk.ravi, first, models.ActionApprove, url.Values{"reason": {"Invoice 7 matches."}}).Status)

		p := desk.rita.Get(t, "/operations/"+second.ID)
		require.Equal(t, http.StatusOK, p.Status)
		assert.Equal(t, []string{"payout-7"}, p.TestIDs("lookalike-key"))
		assert.Equal(t, []string{"approved by ravi@example.com"}, p.TestIDs("lookalike-approved-by"))
		assert.Contains(t, p.Body, "lookalikes--urgent", "an approval: the reviewer is the last defence")
		assert.Equal(t, []string{"payout-7-again"}, desk.rita.Get(t, "/operations/"+first.ID).TestIDs("lookalike-key"))
		assert.Empty(t, desk.rita.Get(t, "/operations/"+other.ID).TestIDs("lookalikes"), "another order's payout")

		queue := desk.rita.Get(t, "/reviews")
		require.Equal(t, http.StatusOK, queue.Status)
		assert.Len(t, queue.TestIDs("review-lookalike"), 2, "the two look-alikes are marked, the other payout is not")

		path := prepareBulk(t, desk.rita, url.Values{}, url.Values{"list": {"reviews"}, "ids": {first.ID, second.ID, other.ID},
			"bulk_action": {models.ActionApprove}})
		notes := desk.rita.Get(t, path).TestIDs("bulk-lookalikes")
		require.Len(t, notes, 1)
		assert.True(t, strings.HasPrefix(notes[0], "payout-7, payout-7-again: the same tool and params under 2 keys"), notes[0])
	})
}
