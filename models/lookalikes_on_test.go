package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLookAlikesOn: by lookalike_on [card_number, amount_cents, currency] the same sum to the
// same card under another order id (another fingerprint) is a look-alike, within the window
// only; another card with the same last four digits is not, though the params every reader
// sees hold the same safe form, since sealed params are compared as sent. Both engines.
func TestLookAlikesOn(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		db := testdb.Open(t, d)
		now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
		l := models.New(models.Config{DB: db, Dialect: d, Key: testdb.Key(t, db), DataKeys: keyring(t, datakey.Generate(), ""),
			Now: func() time.Time { return now }})
		_, err := l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
		require.NoError(t, err)
		payout := func(key, order, card string) *models.Operation {
			t.Helper()
			now = now.Add(time.Minute)
			params := `{"amount_cents":125000,"card_number":"` + card + `","currency":"EUR","order_id":"` + order + `"}`
			masked := `{"amount_cents":125000,"card_number":"•••• 5556","currency":"EUR","order_id":"` + order + `"}`
			s, err := l.Submit(ctx, models.NewOperation{Tenant: "acme", PrincipalID: "prn", APIKeyID: "key", Key: key, Tool: "payouts.card",
				Fingerprint: l.Fingerprint("payouts.card", []byte(params)), Params: []byte(params), Masked: []byte(masked),
				Actor: "api:agent", NeedsApproval: true})
			require.NoError(t, err)
			require.NotNil(t, s.Op.ParamsSealed, "sealed")
			return s.Op
		}
		rule := models.LookAlikeRule{On: []string{"/card_number", "/amount_cents", "/currency"}, Window: time.Hour}
		first := payout("order-7702:payout", "7702", "4000056655665556")
		second := payout("order-7703:payout", "7703", "4000056655665556")
		sameLast4 := payout("order-7704:payout", "7704", "5200828282825556")
		now = now.Add(2 * time.Hour)
		later := payout("order-7705:payout", "7705", "4000056655665556")

		got, more, err := l.LookAlikesBy(ctx, models.AllTenants(), second, rule)
		require.NoError(t, err)
		assert.False(t, more)
		require.Len(t, got, 1)
		assert.Equal(t, first.ID, got[0].ID, "another order id, the same card and sum")

		got, _, err = l.LookAlikesBy(ctx, models.AllTenants(), sameLast4, rule)
		require.NoError(t, err)
		assert.Empty(t, got, "the same last four digits, another card")
		got, _, err = l.LookAlikesBy(ctx, models.AllTenants(), later, rule)
		require.NoError(t, err)
		assert.Empty(t, got, "outside the window")
		got, _, err = l.LookAlikesBy(ctx, models.AllTenants(), later, models.LookAlikeRule{On: rule.On, Window: 3 * time.Hour})
		require.NoError(t, err)
		assert.Len(t, got, 2, "within a wider window")
		got, _, err = l.LookAlikes(ctx, models.AllTenants(), second)
		require.NoError(t, err)
		assert.Empty(t, got, "by fingerprint (every param) the order ids differ")

		marks, err := l.HasLookAlikesBy(ctx, models.AllTenants(),
			[]*models.Operation{{ID: first.ID, Tenant: "acme", Tool: "payouts.card", CreatedAt: first.CreatedAt},
				{ID: sameLast4.ID, Tenant: "acme", Tool: "payouts.card", CreatedAt: sameLast4.CreatedAt}},
			func(string) models.LookAlikeRule { return rule })
		require.NoError(t, err)
		assert.Equal(t, map[string]bool{first.ID: true}, marks, "a queue's probes carry no params: they are read")
	})
}
