package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLookAlikes: the same payout (tool and params: the fingerprint) sent under a second key is a
// look-alike of the first, with its state and who approved it; a different payout, the same
// one for another tenant, and the same one two days apart are not. Both engines.
func TestLookAlikes(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		l, now := consoleLedger(t, d)
		payout := func(tenant, key, fingerprint string) *models.Operation {
			t.Helper()
			*now = now.Add(time.Minute)
			s, err := l.Submit(ctx, models.NewOperation{Tenant: tenant, PrincipalID: "prn", APIKeyID: "key", Key: key, Tool: "payouts.send",
				Fingerprint: fingerprint, Params: []byte(`{}`), Actor: "api:agent", NeedsApproval: true})
			require.NoError(t, err)
			return s.Op
		}
		first := payout("acme", "payout-7", "hmac-sha256:2500-eur-order-7")
		_, err := l.Approve(ctx, models.Action{Scope: models.AllTenants(), Tenant: "acme", OperationID: first.ID,
			Actor: "user:rita@example.com", UserID: "rita", Reason: "invoice matches", ExpectedState: models.StateAwaitingApproval}, 1, time.Hour)
		require.NoError(t, err)
		second := payout("acme", "payout-7-again", "hmac-sha256:2500-eur-order-7")
		other := payout("acme", "payout-8", "hmac-sha256:900-eur-order-8")
		theirs := payout("globex", "payout-7", "hmac-sha256:2500-eur-order-7")
		*now = now.Add(49 * time.Hour)
		later := payout("acme", "payout-7-next-week", "hmac-sha256:2500-eur-order-7")

		got, more, err := l.LookAlikes(ctx, models.AllTenants(), second)
		require.NoError(t, err)
		assert.False(t, more)
		require.Len(t, got, 1, "%+v", got)
		assert.Equal(t, first.ID, got[0].ID)
		assert.Equal(t, "payout-7", got[0].Key)
		assert.Equal(t, models.StatePending, got[0].State, "approved, not yet sent")
		require.Len(t, got[0].ApprovedBy, 1)
		assert.Equal(t, "rita@example.com", got[0].ApprovedBy[0].Name())

		got, _, err = l.LookAlikes(ctx, models.AllTenants(), first)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, second.ID, got[0].ID, "both ways")
		assert.Empty(t, got[0].ApprovedBy)

		for _, op := range []*models.Operation{other, theirs, later} {
			got, _, err := l.LookAlikes(ctx, models.AllTenants(), op)
			require.NoError(t, err)
			assert.Empty(t, got, op.Key)
		}
		got, _, err = l.LookAlikes(ctx, models.OnlyTenants("globex"), second)
		require.NoError(t, err)
		assert.Empty(t, got, "a viewer of another tenant sees none")

		marks, err := l.HasLookAlikes(ctx, models.AllTenants(), []*models.Operation{first, second, other, theirs, later})
		require.NoError(t, err)
		assert.Equal(t, map[string]bool{first.ID: true, second.ID: true}, marks)
	})
}
