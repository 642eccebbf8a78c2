package web_test

import (
	"net/http"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 51 item 6: the dashboard's counts are links, and it shows the approvals waiting, how
// many and what they put at stake (per currency, within the viewer's tenants). Both engines.
func TestDashboardApprovalsWaiting(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7702:payout", Tool: "payouts.card",
			Params: `{"amount_cents":125000,"card_number":"4000056655665556","currency":"EUR","order_id":"7702"}`, NeedsApproval: true})
		desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7710:payout", Tool: "payouts.dual",
			Params: `{"amount_cents":339900,"currency":"EUR","order_id":"7710"}`, NeedsApproval: true})
		desk.con.Operation(t, consoletest.Seed{Tenant: "globex", Key: "order-9:payout", Tool: "payouts.dual",
			Params: `{"amount_cents":5000,"currency":"USD","order_id":"9"}`, NeedsApproval: true})
		desk.unknown(t, "acme", "order-1044:refund")

		p := desk.ravi.Get(t, "/")
		require.Equal(t, http.StatusOK, p.Status)
		assert.Equal(t, []string{"3"}, p.TestIDs("approvals-waiting-count"))
		assert.Equal(t, []string{"4,649.00 EUR + 50.00 USD at stake"}, p.TestIDs("approvals-waiting-sum"))
		assert.Equal(t, []string{"/operations?state=AWAITING_APPROVAL"}, p.Attrs("approvals-waiting", "href"))
		assert.Equal(t, []string{"#overdue-heading"}, p.Attrs("overdue", "href"), "the overdue count leads to its list")
		assert.Equal(t, []string{"/reviews"}, p.Attrs("open-reviews", "href"))
		assert.Len(t, p.Attrs("state-count", "href"), len(models.States), "each state's count is a link")

		// A reviewer of acme sees acme's approvals only.
		p = desk.rita.Get(t, "/")
		assert.Equal(t, []string{"2"}, p.TestIDs("approvals-waiting-count"))
		assert.Equal(t, []string{"4,649.00 EUR at stake"}, p.TestIDs("approvals-waiting-sum"))
	})
}
