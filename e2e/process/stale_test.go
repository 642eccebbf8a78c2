package process_test

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

// clock is a settable clock for the ledger, so leases expire without sleeping.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// staleSetup returns a ledger on engine d with a settable clock, and a caller of tenant acme.
func staleSetup(t *testing.T, d models.Dialect) (*models.Ledger, *clock, *models.Caller) {
	t.Helper()
	ctx := context.Background()
	clk := &clock{now: time.Now().UTC()}
	l := models.New(models.Config{DB: testdb.Open(t, d), Dialect: d, Now: clk.Now})
	_, err := l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
	require.NoError(t, err)
	k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent", nil)
	require.NoError(t, err)
	c, err := l.Authenticate(ctx, k.Secret)
	require.NoError(t, err)
	return l, clk, c
}

// claimNew records a new operation claimed by worker, as a request does, and returns the
// worker's own view of its claim.
func claimNew(t *testing.T, l *models.Ledger, c *models.Caller, key, worker string, lease time.Duration) models.Claimed {
	t.Helper()
	s, err := l.Submit(context.Background(), models.NewOperation{
		Tenant: c.Tenant, PrincipalID: c.PrincipalID, APIKeyID: c.Key.ID, Key: key, Tool: "refunds.issue",
		Fingerprint: "sha256:" + key, Params: []byte(`{"order_id":"1"}`), Actor: c.Actor(),
		Claim: &models.ClaimSpec{Worker: worker, LeaseFor: lease},
	})
	require.NoError(t, err)
	require.True(t, s.Created)
	require.NotNil(t, s.Attempt)
	return models.Claimed{Op: s.Op, Attempt: s.Attempt}
}

// view copies a claim, so each call of the stale worker starts from what it knew at its claim.
func view(c models.Claimed) models.Claimed {
	op, at := *c.Op, *c.Attempt
	return models.Claimed{Op: &op, Attempt: &at}
}

// staleOutcomes are what a stale worker might try to record: every decision an attempt can
// end in.
func staleOutcomes() map[string]models.AttemptOutcome {
	return map[string]models.AttemptOutcome{
		"success": {Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded,
			Result: []byte(`{"id":"R-STALE"}`), DownstreamRef: "R-STALE"},
		"rejection": {Class: "rejected", DownstreamStatus: 422, To: models.StateFailedFinal,
			ErrorClass: models.ErrorRejected, ErrorMessage: "stale"},
		"retry":   {Class: "throttled", DownstreamStatus: 429, To: models.StatePending, NextAttemptAt: time.Now()},
		"unknown": {Class: "ambiguous", To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous},
	}
}

// requireRefused checks that the stale worker can record nothing and extend nothing.
func requireRefused(t *testing.T, l *models.Ledger, stale models.Claimed, worker string) {
	t.Helper()
	ctx := context.Background()
	for name, out := range staleOutcomes() {
		err := l.FinishAttempt(ctx, view(stale), worker, out)
		assert.Equal(t, models.CodeStale, models.ErrorCode(err), "a stale %s must be refused: %v", name, err)
	}
	err := l.ExtendLease(ctx, view(stale), time.Now().Add(time.Hour))
	assert.Equal(t, models.CodeStale, models.ErrorCode(err), "a stale lease extension must be refused: %v", err)
}

// noEventsBy checks that actor wrote nothing after the claim.
func noEventsBy(t *testing.T, l *models.Ledger, id, actor string, after int) {
	t.Helper()
	evs, err := l.Events(context.Background(), "acme", id)
	require.NoError(t, err)
	for _, e := range evs[after:] {
		assert.NotEqual(t, actor, e.Actor, "the stale worker wrote an event: %s", e.Type)
	}
}

func TestStaleWorkerCannotOverwriteRecovery(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()

		t.Run("lease expired, reconciled meanwhile", func(t *testing.T) {
			l, clk, c := staleSetup(t, d)
			stale := claimNew(t, l, c, "k-reconciled", "w1", 2*time.Second)

			clk.Advance(3 * time.Second) // w1 hangs (GC pause, partition) past its lease
			n, err := l.ReapExpiredLeases(ctx, "reaper", 10)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			requireRefused(t, l, stale, "w1") // UNKNOWN: nothing of w1's is taken

			probes, err := l.ClaimProbes(ctx, "rec", []string{"refunds.issue"}, 10, 5*time.Second)
			require.NoError(t, err)
			require.Len(t, probes, 1)
			require.NoError(t, l.RecordProbe(ctx, probes[0], "rec", models.ProbeOutcome{Status: 200, Outcome: "found",
				To: models.StateSucceeded, Result: []byte(`{"id":"R-1"}`), DownstreamRef: "R-1"}))
			decided, err := l.Get(ctx, "acme", stale.Op.ID)
			require.NoError(t, err)
			evs, err := l.Events(ctx, "acme", stale.Op.ID)
			require.NoError(t, err)

			clk.Advance(time.Second)
			requireRefused(t, l, stale, "w1")

			now, err := l.Get(ctx, "acme", stale.Op.ID)
			require.NoError(t, err)
			assert.Equal(t, models.StateSucceeded, now.State, "the reconciler's decision stands")
			require.NotNil(t, now.Result)
			assert.JSONEq(t, `{"id":"R-1"}`, *now.Result)
			assert.Equal(t, "R-1", *now.DownstreamRef)
			assert.Equal(t, decided.Fence, now.Fence)
			assert.Equal(t, decided.CompletedAt, now.CompletedAt)
			assert.Equal(t, decided.UpdatedAt, now.UpdatedAt)
			assert.Equal(t, 1, now.Attempts)
			noEventsBy(t, l, stale.Op.ID, "worker:w1", len(evs))
		})

		t.Run("fence superseded by another worker's claim", func(t *testing.T) {
			l, clk, c := staleSetup(t, d)
			stale := claimNew(t, l, c, "k-reclaimed", "w1", 2*time.Second)

			clk.Advance(3 * time.Second)
			n, err := l.ReapExpiredLeases(ctx, "reaper", 10)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			probes, err := l.ClaimProbes(ctx, "rec", []string{"refunds.issue"}, 10, 5*time.Second)
			require.NoError(t, err)
			require.Len(t, probes, 1)
			// Proven not executed: back to PENDING, and w2 claims the retry.
			require.NoError(t, l.RecordProbe(ctx, probes[0], "rec", models.ProbeOutcome{Status: 404, Outcome: "not_found", To: models.StatePending}))
			claimed, err := l.ClaimDue(ctx, "w2", 10, func(string) time.Duration { return 2 * time.Second })
			require.NoError(t, err)
			require.Len(t, claimed, 1)
			fresh := claimed[0]
			require.Equal(t, models.StateRunning, fresh.Op.State)
			require.Greater(t, fresh.Attempt.Fence, stale.Attempt.Fence)

			// The operation is RUNNING again, as w1 last knew it, but under w2's token.
			requireRefused(t, l, stale, "w1")
			mid, err := l.Get(ctx, "acme", stale.Op.ID)
			require.NoError(t, err)
			assert.Equal(t, models.StateRunning, mid.State)
			assert.Equal(t, "w2", *mid.LeaseOwner, "w1 cannot take the lease back")
			assert.Equal(t, fresh.Op.LeaseExpiresAt.UTC(), mid.LeaseExpiresAt.UTC(), "w1 cannot extend w2's lease")
			assert.Nil(t, mid.Result)

			require.NoError(t, l.FinishAttempt(ctx, fresh, "w2", models.AttemptOutcome{Class: "succeeded", DownstreamStatus: 201,
				To: models.StateSucceeded, Result: []byte(`{"id":"R-2"}`), DownstreamRef: "R-2"}))
			evs, err := l.Events(ctx, "acme", stale.Op.ID)
			require.NoError(t, err)
			requireRefused(t, l, stale, "w1")

			end, err := l.Get(ctx, "acme", stale.Op.ID)
			require.NoError(t, err)
			assert.Equal(t, models.StateSucceeded, end.State)
			assert.JSONEq(t, `{"id":"R-2"}`, *end.Result, "w2's outcome stands")
			assert.Equal(t, 2, end.Attempts)
			noEventsBy(t, l, stale.Op.ID, "worker:w1", len(evs))
			attempts, err := l.Attempts(ctx, stale.Op.ID)
			require.NoError(t, err)
			require.Len(t, attempts, 2)
			require.NotNil(t, attempts[0].Class)
			assert.Equal(t, models.ErrorAmbiguous, *attempts[0].Class, "w1's attempt stays closed as the reaper closed it")
		})

		t.Run("probe superseded by another reconciler", func(t *testing.T) {
			l, clk, c := staleSetup(t, d)
			stale := claimNew(t, l, c, "k-probe", "w1", 2*time.Second)
			clk.Advance(3 * time.Second)
			_, err := l.ReapExpiredLeases(ctx, "reaper", 10)
			require.NoError(t, err)

			first, err := l.ClaimProbes(ctx, "rec1", []string{"refunds.issue"}, 10, time.Second)
			require.NoError(t, err)
			require.Len(t, first, 1)
			none, err := l.ClaimProbes(ctx, "rec2", []string{"refunds.issue"}, 10, time.Second)
			require.NoError(t, err)
			assert.Empty(t, none, "a claimed probe is not claimed twice")

			clk.Advance(2 * time.Second) // rec1's probe outlives its claim
			second, err := l.ClaimProbes(ctx, "rec2", []string{"refunds.issue"}, 10, time.Second)
			require.NoError(t, err)
			require.Len(t, second, 1)
			require.NoError(t, l.RecordProbe(ctx, second[0], "rec2", models.ProbeOutcome{Status: 200, Outcome: "found",
				To: models.StateSucceeded, Result: []byte(`{"id":"R-3"}`), DownstreamRef: "R-3"}))

			err = l.RecordProbe(ctx, first[0], "rec1", models.ProbeOutcome{Status: 404, Outcome: "not_found", To: models.StatePending})
			assert.Equal(t, models.CodeStale, models.ErrorCode(err), "the superseded probe records nothing: %v", err)
			err = l.RecordProbe(ctx, first[0], "rec1", models.ProbeOutcome{Status: 500, Outcome: "error", To: models.StateUnknown, NextProbeAt: clk.Now()})
			assert.Equal(t, models.CodeStale, models.ErrorCode(err), "not even a reschedule: %v", err)
			requireRefused(t, l, stale, "w1")

			end, err := l.Get(ctx, "acme", stale.Op.ID)
			require.NoError(t, err)
			assert.Equal(t, models.StateSucceeded, end.State)
			assert.JSONEq(t, `{"id":"R-3"}`, *end.Result)
		})
	})
}
