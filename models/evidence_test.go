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

// The queue and bulk decisions read what each operation's last attempt saw and a tally of its
// look-ups by answer, for the whole page at once, within scope.
func TestEvidence(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		l, now := consoleLedger(t, d)
		acme := models.OnlyTenants("acme")

		refund := submit(t, l, "acme", "order-1:refund", "refunds.issue", true)
		require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: refund.Op, Attempt: refund.Attempt}, "w",
			models.AttemptOutcome{Class: models.ErrorAmbiguous, Error: "context deadline exceeded", To: models.StateUnknown,
				ErrorClass: models.ErrorAmbiguous, ErrorMessage: "no answer"}))
		for i, status := range []int{500, 500, 0} {
			*now = now.Add(time.Minute)
			claimed, err := l.ClaimProbes(ctx, "w", []string{"refunds.issue"}, 10, time.Minute)
			require.NoError(t, err)
			require.Len(t, claimed, 1, "look-up %d", i+1)
			outcome := "error"
			if status == 0 {
				outcome = "not_found"
			}
			require.NoError(t, l.RecordProbe(ctx, claimed[0], "w", models.ProbeOutcome{Status: status, Outcome: outcome,
				To: models.StateUnknown, NextProbeAt: now.Add(time.Second)}))
		}
		_, err := l.OpenReview(ctx, refund.Op, models.ReasonUnknownOutcome, "worker:w")
		require.NoError(t, err)
		fresh := submit(t, l, "acme", "order-2:refund", "refunds.issue", false)
		_, err = l.OpenReview(ctx, fresh.Op, models.ReasonManual, "user:ada@example.com")
		require.NoError(t, err)

		items, _, err := l.ReviewQueue(ctx, acme, models.ReviewFilter{Limit: 10})
		require.NoError(t, err)
		require.Len(t, items, 2)
		ev := items[0].Evidence
		assert.Equal(t, 1, ev.Attempts)
		require.NotNil(t, ev.LastClass)
		assert.Equal(t, models.ErrorAmbiguous, *ev.LastClass)
		require.NotNil(t, ev.LastError)
		assert.Equal(t, "context deadline exceeded", *ev.LastError)
		assert.Nil(t, ev.LastStatus)
		assert.Equal(t, []models.LookupCount{{Outcome: "error", Status: "500", N: 2}, {Outcome: "not_found", N: 1}}, ev.Lookups)
		assert.Zero(t, items[1].Attempts)
		assert.Nil(t, items[1].LastClass, "nothing tried, nothing seen")
		assert.Empty(t, items[1].Lookups)

		byID, err := l.Evidence(ctx, acme, []string{refund.Op.ID, fresh.Op.ID})
		require.NoError(t, err)
		assert.Equal(t, ev, byID[refund.Op.ID], "the bulk page reads what the queue reads")
		assert.Contains(t, byID, fresh.Op.ID)
		none, err := l.Evidence(ctx, models.OnlyTenants("globex"), []string{refund.Op.ID})
		require.NoError(t, err)
		assert.Empty(t, none, "another tenant's evidence is not read")
	})
}
