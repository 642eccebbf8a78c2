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
