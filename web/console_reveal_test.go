package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 51 item 1: a payout's card declares reveal: last4, so a
// reviewer sees which card gets the money (•••• 4242) in the headline, the queue, the params
// and exports, while the API's view of the same operation keeps "***"; the full number shows
// nowhere.
func TestRevealedCardForPeople(t *testing.T) {
	t.Parallel()
	const card = "4000056655665556"
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newAuditDesk(t, d)
		op := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-7702:payout", Tool: "payouts.card",
			Params: `{"amount_cents":125000,"card_number":"` + card + `","currency":"EUR","order_id":"7702"}`, NeedsApproval: true})

		page := desk.aude.Get(t, "/operations/"+op.ID)
		require.Equal(t, http.StatusOK, page.Status)
		assert.Equal(t, []string{"1,250.00 EUR to card •••• 5556 for order 7702"}, page.TestIDs("operation-headline"))
		assert.Contains(t, page.Body, `&#34;card_number&#34;: &#34;•••• 5556&#34;`, "the params show the safe form")
		assert.NotContains(t, page.Body, card)

		queue := desk.ada.Get(t, "/reviews")
		require.Equal(t, http.StatusOK, queue.Status)
		assert.Equal(t, []string{"1,250.00 EUR to card •••• 5556 for order 7702"}, queue.TestIDs("review-summary"))
		assert.NotContains(t, queue.Body, card)

		for _, format := range []string{"csv", "ndjson"} {
			p := download(t, desk.aude, "format="+format+"&tool=payouts.card")
			require.Equal(t, http.StatusOK, p.Status, p.Body)
			assert.Contains(t, p.Body, "•••• 5556", format)
			assert.NotContains(t, p.Body, card, format)
		}

		api := opview.Render(desk.con.Catalog, op)
		assert.Contains(t, string(api.Params), `"card_number":"***"`, "the API keeps ***")
		assert.False(t, strings.Contains(string(api.Params), "5556"))
	})
}

// With a data key the ledger seals the card and keeps, in the params every reader sees, the
// safe form in its place: the console shows •••• 5556 from what it reads, the API "***", and
// the column holds no more of the number than that.
func TestRevealedCardSealed(t *testing.T) {
	t.Parallel()
	const card = "4000056655665556"
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		keys, err := datakey.Parse(datakey.Generate(), "")
		require.NoError(t, err)
		con := consoletest.Start(t, d, consoletest.Options{DataKeys: keys})
		con.Tenant(t, "acme")
		tool, ok := con.Catalog.Get("payouts.card")
		require.True(t, ok)
		res, err := con.Executor.Submit(t.Context(), jobs.SubmitRequest{Key: "order-7702:payout", Tool: tool,
			Caller: &models.Caller{Tenant: "acme", PrincipalID: "prn_test", PrincipalName: "agent", Key: models.APIKey{ID: "key_test"}},
			Params: []byte(`{"amount_cents":125000,"card_number":"` + card + `","currency":"EUR","order_id":"7702"}`)})
		require.NoError(t, err)
		op := res.Op
		require.NotNil(t, op.ParamsSealed, "sealed")
		require.NotNil(t, op.Params)
		assert.Contains(t, *op.Params, `"card_number":"•••• 5556"`, "the safe form kept in the clear column")
		assert.NotContains(t, *op.Params, card)
		clear, err := con.Ledger.Params(op)
		require.NoError(t, err)
		assert.Contains(t, string(clear), card, "the downstream still gets the number")

		pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
		b := con.NewBrowser(t)
		b.MustLogin(t, "rita@example.com", pw)
		page := b.Get(t, "/operations/"+op.ID)
		require.Equal(t, http.StatusOK, page.Status)
		assert.Equal(t, []string{"1,250.00 EUR to card •••• 5556 for order 7702"}, page.TestIDs("operation-headline"))
		assert.Contains(t, string(opview.Render(con.Catalog, op).Params), `"card_number":"***"`, "the API keeps ***")
	})
}
