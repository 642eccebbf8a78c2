package web_test

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What to look for downstream, by what the downstream can be searched by: the downstream key
// where it keeps or links it (the refund), the call's details and time window where it keeps
// none (the email), and nothing for a payout that was never sent. Both engines.
func TestSituationSaysWhatToSearchBy(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		refund := desk.unknown(t, "acme", "order-1044:refund")
		email := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "reset:maria", Tool: "email.send",
			Params: `{"to":"maria@example.com","subject":"Reset your password","body":"…"}`, Unknown: true, Review: true})
		payout := desk.awaiting(t, "payouts.dual", "order-7:payout")
		page := func(op *models.Operation) *consoletest.Page {
			p := desk.rita.Get(t, "/operations/"+op.ID)
			require.Equal(t, http.StatusOK, p.Status)
			return p
		}
		rec, err := desk.con.Ledger.OperationRecord(t.Context(), models.AllTenants(), refund.ID)
		require.NoError(t, err)
		assert.Equal(t, []string{rec.Op.DownstreamKeySent()}, page(refund).TestIDs("situation-reference"))

		p := page(email)
		assert.Contains(t, p.Body, "Search the downstream by")
		ref := p.TestIDs("situation-reference")
		require.Len(t, ref, 1)
		assert.Regexp(t, regexp.MustCompile(`maria@example\.com.*, sent between \d{4}-\d\d-\d\d \d\d:\d\d:\d\d and \d\d:\d\d:\d\d UTC$`), ref[0])
		assert.NotContains(t, ref[0], "dk_", "a key the downstream never kept is no help")

		assert.Empty(t, page(payout).TestIDs("situation-reference"), "a payout never sent has nothing to search for")
	})
}

// A refund whose card number is masked in its params, and whose downstream answer names the
// card's last four digits: the params say so beside the mask; without such an answer, nothing
// is said. Both engines.
func TestMaskedCardNamesItsLastFour(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		paid := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1050:refund", Tool: "refunds.issue",
			Params: `{"amount_cents":4200,"card_number":"4111111111114242","currency":"EUR","order_id":"1050"}`,
			Outcome: &models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded,
				Result: []byte(`{"id":"re_1","card":{"brand":"visa","last4":"4242"}}`), DownstreamRef: "re_1"}})
		p := desk.rita.Get(t, "/operations/"+paid.ID)
		require.Equal(t, http.StatusOK, p.Status)
		assert.Equal(t, []string{"Sensitive values are masked (***). The downstream's answer names the card or account ending in 4242."},
			p.TestIDs("params-note"))
		assert.NotContains(t, p.Body, "4111111111114242")

		plain := desk.unknown(t, "acme", "order-1051:refund")
		assert.Empty(t, desk.rita.Get(t, "/operations/"+plain.ID).TestIDs("params-note"))
	})
}
