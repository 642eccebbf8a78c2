package process_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A worker's claim is lost with the database: an asynchronous standby is promoted (or a
// backup restored) that never saw the claim, and the operation is PENDING there, as it was
// before. The dispatcher claims it again, with the same fencing token, since the token counts
// from what the database has. The first worker, still holding its attempt, must record
// nothing: its outcome would be written over a claim it does not hold.
func TestClaimLostWithTheDatabaseRecordsNothing(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		l, clk, c := staleSetup(t, d)
		first := claimNew(t, l, c, "k-lost", "w1", 5*time.Second)
		require.NoError(t, l.FinishAttempt(ctx, first, "w1", models.AttemptOutcome{Class: "throttled", DownstreamStatus: 429,
			To: models.StatePending, NextAttemptAt: clk.Now()}))
		leaseFor := func(string) time.Duration { return 5 * time.Second }

		// The claim that the database will lose.
		claimed, err := l.ClaimDue(ctx, "w1", 10, leaseFor)
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		lost := view(claimed[0])
		rewindClaim(t, l, lost)

		// The same process claims again on the database that lost it: same token, same
		// attempt number, another attempt.
		claimed, err = l.ClaimDue(ctx, "w1", 10, leaseFor)
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		fresh := claimed[0]
		require.Equal(t, lost.Attempt.Fence, fresh.Attempt.Fence, "the premise: the token was issued again")
		require.Equal(t, lost.Attempt.Number, fresh.Attempt.Number)
		require.NotEqual(t, lost.Attempt.ID, fresh.Attempt.ID)

		requireRefused(t, l, lost, "w1")
		mid, err := l.Get(ctx, "acme", fresh.Op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateRunning, mid.State, "the lost attempt's outcome was not recorded over the fresh claim")
		assert.Nil(t, mid.Result)
		assert.Equal(t, fresh.Op.LeaseExpiresAt.UTC(), mid.LeaseExpiresAt.UTC(), "nor its lease extended")

		require.NoError(t, l.ExtendLease(ctx, fresh, clk.Now().Add(10*time.Second)), "the fresh claim holds")
		require.NoError(t, l.FinishAttempt(ctx, fresh, "w1", models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201,
			To: models.StateSucceeded, Result: []byte(`{"id":"T-2"}`), DownstreamRef: "T-2"}))
		end, err := l.Get(ctx, "acme", fresh.Op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateSucceeded, end.State)
		assert.JSONEq(t, `{"id":"T-2"}`, *end.Result)
	})
}

// rewindClaim puts the ledger back as it was before claim c: what a database that never
// received the claim's commit has.
func rewindClaim(t *testing.T, l *models.Ledger, c models.Claimed) {
	t.Helper()
	db := l.DB()
	require.NoError(t, db.Exec("DELETE FROM events WHERE operation_id = ? AND attempt = ?", c.Op.ID, c.Attempt.Number).Error)
	require.NoError(t, db.Exec("DELETE FROM attempts WHERE id = ?", c.Attempt.ID).Error)
	res := db.Model(&models.Operation{}).Where("id = ?", c.Op.ID).Updates(map[string]any{
		"state": models.StatePending, "fence": c.Attempt.Fence - 1, "attempts": c.Attempt.Number - 1,
		"lease_owner": nil, "lease_expires_at": nil, "next_attempt_at": c.Attempt.StartedAt})
	require.NoError(t, res.Error)
	require.EqualValues(t, 1, res.RowsAffected)
}
