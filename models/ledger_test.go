package models_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func setup(t testing.TB, d models.Dialect) (*models.Ledger, *models.Caller) {
	t.Helper()
	ctx := context.Background()
	l := testdb.Ledger(t, d)
	return l, agentOf(ctx, t, l)
}

// agentOf creates tenant acme on l with an API key of principal agent-1, and returns its caller.
func agentOf(ctx context.Context, t testing.TB, l *models.Ledger) *models.Caller {
	t.Helper()
	_, err := l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
	require.NoError(t, err)
	k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent-1", nil)
	require.NoError(t, err)
	c, err := l.Authenticate(ctx, k.Secret)
	require.NoError(t, err)
	return c
}

func newOp(c *models.Caller, key string) models.NewOperation {
	return models.NewOperation{Tenant: c.Tenant, PrincipalID: c.PrincipalID, APIKeyID: c.Key.ID, Key: key,
		Tool: "tickets.create", Fingerprint: "sha256:aa", Params: []byte(`{"subject":"x"}`), Actor: c.Actor()}
}

func TestSubmitConcurrentDuplicatesCreateOne(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		var wg sync.WaitGroup
		var mu sync.Mutex
		created, ids := 0, map[string]bool{}
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				in := newOp(c, "k1")
				in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
				s, err := l.Submit(ctx, in)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				ids[s.Op.ID] = true
				if s.Created {
					created++
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, 1, created)
		assert.Len(t, ids, 1)
	})
}

func TestSubmitMismatchAndFinish(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		in := newOp(c, "k1")
		in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		require.True(t, s.Created)
		require.Equal(t, models.StateRunning, s.Op.State)

		other := newOp(c, "k1")
		other.Fingerprint = "sha256:bb"
		_, err = l.Submit(ctx, other)
		require.Equal(t, models.CodeKeyMismatch, models.ErrorCode(err))

		// A stale fence records nothing.
		stale := models.Claimed{Attempt: &models.Attempt{ID: s.Attempt.ID, Number: 1, Fence: 99}}
		cp := *s.Op
		stale.Op = &cp
		err = l.FinishAttempt(ctx, stale, "w1", models.AttemptOutcome{Class: "succeeded", To: models.StateSucceeded})
		require.Equal(t, models.CodeStale, models.ErrorCode(err))

		err = l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", models.AttemptOutcome{
			Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded, Result: []byte(`{"id":"T-1"}`), DownstreamRef: "T-1"})
		require.NoError(t, err)
		got, err := l.Get(ctx, "acme", s.Op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateSucceeded, got.State)
		assert.Equal(t, `{"id":"T-1"}`, *got.Result)
		assert.Nil(t, got.LeaseOwner)
		assert.NotNil(t, got.CompletedAt)
		evs, err := l.Events(ctx, "acme", s.Op.ID)
		require.NoError(t, err)
		var types []string
		for _, e := range evs {
			types = append(types, e.Type)
		}
		assert.Equal(t, []string{"created", "attempt_started", "attempt_finished", "state_changed"}, types)
	})
}

func TestRetryClaimDue(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		base, c := setup(t, d)
		// The same database through a ledger whose clock the test moves: "due" must not
		// depend on how fast a loaded machine runs the test.
		now := time.Now().UTC()
		l := models.New(models.Config{DB: base.DB(), Dialect: d, Now: func() time.Time { return now }})
		ctx := context.Background()
		in := newOp(c, "k2")
		in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Hour}
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		due := now.Add(time.Minute)
		require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", models.AttemptOutcome{
			Class: "throttled", DownstreamStatus: 429, To: models.StatePending, NextAttemptAt: due}))
		lease := func(string) time.Duration { return time.Minute }
		cl, err := l.ClaimDue(ctx, "w2", 10, lease)
		require.NoError(t, err)
		assert.Empty(t, cl, "not due yet")
		now = now.Add(2 * time.Minute)
		cl, err = l.ClaimDue(ctx, "w2", 10, lease)
		require.NoError(t, err)
		require.Len(t, cl, 1)
		assert.Equal(t, 2, cl[0].Op.Attempts)
		assert.Equal(t, int64(2), cl[0].Op.Fence)
		assert.Equal(t, 2, cl[0].Attempt.Number)
		got, err := l.Get(ctx, "acme", s.Op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateRunning, got.State)
		assert.Equal(t, int64(2), got.Fence)
	})
}
