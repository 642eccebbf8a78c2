package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

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
		require.Equal(t, http.StatusSeeOther, act(t, desk.ravi, first, models.ActionApprove,
			url.Values{"reason": {"Invoice 7 matches."}, "confirmed": {"1"}}).Status)

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

// Issue 51 item 3: payouts.card looks alike by card, amount and currency (review.lookalike_on),
// so the same 1,250.00 EUR to the same card under another order id is flagged, on its page (the
// panel naming the equal fields and which came first) and in the queue; another card is not.
// Approving a look-alike is refused without the form's confirmation, and accepted with it.
// Both engines.
func TestLookAlikeOnAndConfirmation(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		payout := func(order, card string) *models.Operation {
			desk.con.Clock.Advance(time.Minute)
			return desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-" + order + ":payout", Tool: "payouts.card",
				Params: `{"amount_cents":125000,"card_number":"` + card + `","currency":"EUR","order_id":"` + order + `"}`, NeedsApproval: true})
		}
		first := payout("7702", "4000056655665556")
		second := payout("7703", "4000056655665556")
		otherCard := payout("7704", "4242424242424242")

		p := desk.rita.Get(t, "/operations/"+second.ID)
		require.Equal(t, http.StatusOK, p.Status)
		assert.Equal(t, []string{"order-7702:payout"}, p.TestIDs("lookalike-key"), "flagged though the order ids differ")
		equal := strings.Join(strings.Fields(strings.Join(p.TestIDs("lookalikes-equal"), "")), " ")
		assert.Contains(t, equal, "with card_number, amount_cents and currency equal")
		assert.Contains(t, equal, "within a day")
		assert.Equal(t, []string{"order-7702:payout came first, 1 min before this one."}, p.TestIDs("lookalikes-first"))
		assert.Equal(t, []string{"This one came first: the others were made after it."},
			desk.rita.Get(t, "/operations/"+first.ID).TestIDs("lookalikes-first"))
		assert.Len(t, p.TestIDs("action-confirm-approve"), 1, "the approval form asks for the confirmation")
		assert.Empty(t, desk.rita.Get(t, "/operations/"+otherCard.ID).TestIDs("lookalikes"), "another card")
		assert.Empty(t, desk.rita.Get(t, "/operations/"+otherCard.ID).TestIDs("action-confirm-approve"))

		queue := desk.rita.Get(t, "/reviews")
		require.Equal(t, http.StatusOK, queue.Status)
		assert.Len(t, queue.TestIDs("review-lookalike"), 2, "the two payouts to one card are marked, the other card's is not")

		// A bulk approval has no confirmation: the look-alike is refused, saying why, the other
		// card's payout approved.
		path := prepareBulk(t, desk.rita, url.Values{}, url.Values{"list": {"reviews"}, "ids": {first.ID, otherCard.ID},
			"bulk_action": {models.ActionApprove}})
		result := applyBulk(t, desk.rita, path, url.Values{"reason": {"Invoices checked."}})
		assert.Equal(t, []string{"1"}, result.TestIDs("bulk-done"))
		assert.Equal(t, []string{"1"}, result.TestIDs("bulk-refused"))
		assert.Contains(t, strings.Join(result.TestIDs("bulk-outcome"), " "), "looks like order-7703:payout (card_number, amount_cents and currency equal)")
		assert.Equal(t, models.StateAwaitingApproval, desk.record(t, first).Op.State)
		assert.Equal(t, models.StatePending, desk.record(t, otherCard).Op.State, "no look-alike: no confirmation needed")

		refused := act(t, desk.rita, second, models.ActionApprove, url.Values{"reason": {"Invoice 7703."}})
		require.Equal(t, http.StatusSeeOther, refused.Status)
		p = desk.rita.Get(t, "/operations/"+second.ID)
		assert.Contains(t, strings.Join(p.TestIDs("notice"), " "), "approving it needs your confirmation")
		assert.Empty(t, reviewActions(desk.record(t, second)), "nothing approved without the confirmation")
		assert.Equal(t, map[string]int{first.ID: 1, second.ID: 1}, auditOf(t, desk.con, "review."+models.ActionApprove, models.OutcomeRefused))

		require.Equal(t, http.StatusSeeOther, act(t, desk.rita, second, models.ActionApprove,
			url.Values{"reason": {"Invoice 7703 is a second, real order."}, "confirmed": {"1"}}).Status)
		assert.Equal(t, []string{desk.ritaID + " approve"}, reviewActions(desk.record(t, second)))
		assert.Equal(t, models.StatePending, desk.record(t, second).Op.State)

	})
}
