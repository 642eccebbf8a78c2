package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every operation page leads with what is at stake: the tool's summary with the formatted
// amount, the downstream it calls and the agent's reason; the approve and retry buttons name
// the amount. The queue row carries the reason too.
func TestOperationPageLeadsWithTheStakes(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		payout := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7702:payout", Tool: "payouts.dual",
			Params: `{"amount_cents":480000,"currency":"EUR","order_id":"7702"}`, NeedsApproval: true,
			Justification: "The supplier's invoice 7702 is due today; the contract is in the shared drive."})
		refund := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1044:refund", Tool: "refunds.issue",
			Params: `{"amount_cents":4200,"currency":"EUR","order_id":"1044"}`, Unknown: true, Review: true})
		email := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "reset:maria", Tool: "email.send",
			Params: `{"to":"maria.rossi@example.com","subject":"Reset your password","body":"…"}`, Unknown: true, Review: true})

		page := desk.rita.Get(t, "/operations/"+payout.ID)
		require.Equal(t, http.StatusOK, page.Status)
		assert.Equal(t, []string{"4,800.00 EUR for order 7702"}, page.TestIDs("operation-headline"))
		assert.Equal(t, []string{"order-7702:payout"}, page.TestIDs("operation-key"), "the key is still there, under the headline")
		assert.Contains(t, strings.Join(page.TestIDs("operation-justification"), ""), "invoice 7702 is due today")
		assert.Contains(t, strings.Join(page.TestIDs("operation-downstream"), ""), "calls 127.0.0.1")
		assert.Contains(t, page.Body, "Approve 4,800.00 EUR", "the approve button names the amount")

		page = desk.rita.Get(t, "/operations/"+refund.ID)
		assert.Equal(t, []string{"42.00 EUR to order 1044"}, page.TestIDs("operation-headline"))
		assert.Contains(t, page.Body, "Retry 42.00 EUR: it is not there", "the risky retry names the amount")

		page = desk.rita.Get(t, "/operations/"+email.ID)
		assert.Equal(t, []string{"To maria.rossi@example.com: Reset your password"}, page.TestIDs("operation-headline"))
		assert.Empty(t, page.TestIDs("operation-justification"), "no reason given, none shown")

		queue := desk.rita.Get(t, "/reviews")
		assert.Contains(t, strings.Join(queue.TestIDs("review-justification"), "|"), "invoice 7702 is due today")
	})
}

// What happened is said as what is known: an ambiguous answer leads with the uncertainty and
// names the effect in question, which differs between an email and a refund.
func TestOutcomeSaysWhatIsKnown(t *testing.T) {
	t.Parallel()
	desk := newReviewDesk(t, models.SQLite, consoletest.Options{})
	email := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "reset:ann", Tool: "email.send",
		Params: `{"to":"ann@example.com","subject":"Reset","body":"…"}`, Unknown: true, Review: true})
	refund := desk.unknown(t, "acme", "order-9:refund")
	for op, want := range map[*models.Operation]string{
		email:  "The request reached the email service, which answered HTTP 504: it is not known whether the email went out.",
		refund: "The request reached the refunds service, which answered HTTP 504: it is not known whether the refund was made.",
	} {
		page := desk.rita.Get(t, "/operations/"+op.ID)
		assert.Equal(t, []string{want}, page.TestIDs("situation-outcome"), op.Key)
		assert.NotContains(t, strings.Join(page.TestIDs("situation-outcome"), ""), "Sent;")
	}
}
