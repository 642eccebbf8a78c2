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

// TestLeaseReaper runs the lease reaper on the ledger's injected clock (docs/STATES.md): a RUNNING
// operation whose lease expired goes to UNKNOWN, since its request may have been sent; one whose
// lease has not expired stays RUNNING; and the worker that lost the lease can record nothing
// afterwards, neither at once nor after the operation was proven not executed and claimed again
// by another worker under a new fencing token.
func TestLeaseReaper(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		base, c := setup(t, d)
		start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
		now := start
		l := models.New(models.Config{DB: base.DB(), Dialect: d, Now: func() time.Time { return now }})
		ctx := context.Background()
		claim := func(key string, lease time.Duration) models.Claimed {
			in := newOp(c, key)
			in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: lease}
			s, err := l.Submit(ctx, in)
			require.NoError(t, err)
			require.Equal(t, models.StateRunning, s.Op.State)
			return models.Claimed{Op: s.Op, Attempt: s.Attempt}
		}
		short, long := claim("short-lease", time.Minute), claim("long-lease", time.Hour)
		state := func(cl models.Claimed) *models.Operation {
			op, err := l.Get(ctx, "acme", cl.Op.ID)
			require.NoError(t, err)
			return op
		}

		now = start.Add(time.Minute) // the short lease ends now, but has not expired yet
		n, err := l.ReapExpiredLeases(ctx, "reaper", 10)
		require.NoError(t, err)
		assert.Zero(t, n, "a lease is reaped only once it has expired")
		assert.Equal(t, models.StateRunning, state(short).State)

		now = start.Add(time.Minute + time.Microsecond)
		n, err = l.ReapExpiredLeases(ctx, "reaper", 10)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		reaped := state(short)
		assert.Equal(t, models.StateUnknown, reaped.State, "its request may have been sent")
		assert.True(t, reaped.Ambiguous)
		if assert.NotNil(t, reaped.ErrorClass) {
			assert.Equal(t, models.ErrorAmbiguous, *reaped.ErrorClass)
		}
		assert.Nil(t, reaped.LeaseOwner, "the lease is gone with the RUNNING state")
		assert.Equal(t, models.StateRunning, state(long).State, "an unexpired lease is left alone")
		evs := events(t, l, reaped)
		last := evs[len(evs)-1]
		assert.Equal(t, "worker:reaper", last.Actor)
		assert.Equal(t, [2]models.State{models.StateRunning, models.StateUnknown}, [2]models.State{*last.FromState, *last.ToState})
		assert.Contains(t, *last.Detail, "lease_expired")

		late := models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded, Result: []byte(`{"id":"T-9"}`)}
		err = l.FinishAttempt(ctx, short, "w1", late)
		assert.Equal(t, models.CodeStale, models.ErrorCode(err), "the worker that lost its lease records nothing: %v", err)
		assert.Equal(t, models.CodeStale, models.ErrorCode(l.ExtendLease(ctx, short, now.Add(time.Hour))), "nor extends it")
		assert.Equal(t, models.StateUnknown, state(short).State)

		// Proven not executed, the operation runs again under another worker's claim.
		probes, err := l.ClaimProbes(ctx, "reconciler", []string{reaped.Tool}, 10, time.Minute)
		require.NoError(t, err)
		require.Len(t, probes, 1)
		require.NoError(t, l.RecordProbe(ctx, probes[0], "reconciler", models.ProbeOutcome{Status: 404, Outcome: "not_found", To: models.StatePending}))
		again, err := l.ClaimDue(ctx, "w2", 10, func(string) time.Duration { return time.Minute })
		require.NoError(t, err)
		require.Len(t, again, 1)
		require.Equal(t, short.Op.ID, again[0].Op.ID)
		require.Greater(t, again[0].Attempt.Fence, short.Attempt.Fence, "a new claim, a new fencing token")

		err = l.FinishAttempt(ctx, short, "w1", late)
		assert.Equal(t, models.CodeStale, models.ErrorCode(err), "RUNNING again, but not under w1's token: %v", err)
		rerun := state(short)
		assert.Equal(t, models.StateRunning, rerun.State)
		assert.Equal(t, "w2", *rerun.LeaseOwner)
		assert.Nil(t, rerun.Result, "the late write left no result")
		require.NoError(t, l.FinishAttempt(ctx, again[0], "w2", late), "the lease holder records its outcome")
		assert.Equal(t, models.StateSucceeded, state(short).State)
	})
}
