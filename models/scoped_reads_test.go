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

// consoleLedger is a ledger on a movable clock with tenants acme and globex.
func consoleLedger(t *testing.T, d models.Dialect) (*models.Ledger, *time.Time) {
	t.Helper()
	now := time.Date(2026, 11, 29, 10, 20, 0, 0, time.UTC)
	l := models.New(models.Config{DB: testdb.Open(t, d), Dialect: d, Now: func() time.Time { return now }})
	for _, name := range []string{"acme", "globex"} {
		_, err := l.CreateTenant(context.Background(), models.AllTenants(), models.Requester{Actor: models.ActorCLI}, name)
		require.NoError(t, err)
	}
	return l, &now
}

func submit(t *testing.T, l *models.Ledger, tenant, key, tool string, claim bool) models.Submitted {
	t.Helper()
	in := models.NewOperation{Tenant: tenant, PrincipalID: "prn", APIKeyID: "key", Key: key, Tool: tool,
		Fingerprint: "sha256:" + key, Params: []byte(`{}`), WorkflowRunID: "wf-" + tenant, Actor: "api:agent"}
	if claim {
		in.Claim = &models.ClaimSpec{Worker: "w", LeaseFor: time.Minute}
	}
	s, err := l.Submit(context.Background(), in)
	require.NoError(t, err)
	return s
}

func TestDashboardReads(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		l, now := consoleLedger(t, d)
		acme := models.OnlyTenants("acme")

		pending := submit(t, l, "acme", "a-pending", "tickets.create", false)
		unknown := submit(t, l, "acme", "a-unknown", "refunds.issue", true)
		require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: unknown.Op, Attempt: unknown.Attempt}, "w",
			models.AttemptOutcome{Class: models.ErrorAmbiguous, To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous}))
		done := submit(t, l, "acme", "a-done", "tickets.create", true)
		require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: done.Op, Attempt: done.Attempt}, "w",
			models.AttemptOutcome{Class: "succeeded", To: models.StateSucceeded, Result: []byte(`{"id":"T-1"}`)}))
		submit(t, l, "globex", "g-running", "tickets.create", true)
		_, err := l.OpenReview(ctx, unknown.Op, models.ReasonUnknownOutcome, "worker:w")
		require.NoError(t, err)

		w := models.Windows{UnknownAfter: map[string]time.Duration{"refunds.issue": 10 * time.Minute, "tickets.create": time.Hour},
			UnknownDefault: time.Minute, PendingGrace: time.Minute}
		db, err := l.Dashboard(ctx, acme, w)
		require.NoError(t, err)
		assert.Equal(t, map[models.State]int64{models.StatePending: 1, models.StateUnknown: 1, models.StateSucceeded: 1}, db.ByState)
		assert.Equal(t, int64(1), db.OpenReviews)
		require.NotNil(t, db.OldestUnresolved)
		assert.Equal(t, pending.Op.ID, db.OldestUnresolved.ID)
		assert.Zero(t, db.OverdueCount)
		require.Len(t, db.Attempts, 24)
		last := db.Attempts[23]
		assert.Equal(t, now.Truncate(time.Hour), last.Start)
		assert.Equal(t, map[string]int64{"ambiguous": 1, "succeeded": 1}, last.Counts, "globex's running attempt is out of scope")

		*now = now.Add(11 * time.Minute) // the refund passed its 10 min; the lease of globex's claim too
		db, err = l.Dashboard(ctx, acme, w)
		require.NoError(t, err)
		assert.Equal(t, int64(2), db.OverdueCount, "UNKNOWN past escalate_after and PENDING past its grace")
		ids := []string{db.Overdue[0].ID, db.Overdue[1].ID}
		assert.ElementsMatch(t, []string{pending.Op.ID, unknown.Op.ID}, ids)

		everyone, err := l.Dashboard(ctx, models.AllTenants(), w)
		require.NoError(t, err)
		assert.Equal(t, int64(3), everyone.OverdueCount, "RUNNING past its lease counts too")
		assert.Equal(t, int64(1), everyone.ByState[models.StateRunning])

		// Probes: one finished reconcile probe, counted by outcome in its hour.
		claimed, err := l.ClaimProbes(ctx, "w", []string{"refunds.issue"}, 10, time.Minute)
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		require.NoError(t, l.RecordProbe(ctx, claimed[0], "w", models.ProbeOutcome{Status: 404, Outcome: "not_settled",
			To: models.StateUnknown, NextProbeAt: now.Add(time.Second)}))
		db, err = l.Dashboard(ctx, acme, w)
		require.NoError(t, err)
		assert.Equal(t, map[string]int64{"not_settled": 1}, db.Probes[23].Counts)
	})
}

func TestSearchAndQueueReads(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		l, now := consoleLedger(t, d)
		first := submit(t, l, "acme", "order-1:refund", "refunds.issue", false)
		*now = now.Add(time.Hour)
		second := submit(t, l, "acme", "order-2:ticket", "tickets.create", false)
		theirs := submit(t, l, "globex", "order-1:refund", "refunds.issue", false)
		acme := models.OnlyTenants("acme")

		search := func(s models.Scope, f models.Search) []string {
			t.Helper()
			if f.Limit == 0 {
				f.Limit = 10
			}
			ops, _, err := l.SearchOperations(ctx, s, f)
			require.NoError(t, err)
			var ids []string
			for _, op := range ops {
				ids = append(ids, op.ID)
			}
			return ids
		}
		assert.Equal(t, []string{second.Op.ID, first.Op.ID}, search(acme, models.Search{}), "newest first, in scope")
		assert.Equal(t, []string{first.Op.ID}, search(acme, models.Search{Key: "order-1"}))
		assert.Empty(t, search(acme, models.Search{Key: "order-%"}), "no wildcards")
		assert.Empty(t, search(acme, models.Search{Key: "order_1"}), "no wildcards")
		assert.Equal(t, []string{first.Op.ID}, search(acme, models.Search{Key: "ORDER-1"}), "a key matches ignoring case")
		assert.Equal(t, []string{first.Op.ID}, search(acme, models.Search{Key: "1:ref"}), "anywhere in the key")
		assert.Equal(t, []string{second.Op.ID}, search(acme, models.Search{Tool: "tickets.create"}))
		assert.Equal(t, []string{second.Op.ID}, search(acme, models.Search{From: now.Add(-time.Minute)}))
		assert.Equal(t, []string{first.Op.ID}, search(acme, models.Search{To: now.Add(-time.Minute)}))
		assert.Empty(t, search(acme, models.Search{Tenant: "globex"}))
		assert.Len(t, search(models.AllTenants(), models.Search{Key: "order-1"}), 2)
		assert.Empty(t, search(models.OnlyTenants(), models.Search{}), "an empty scope sees nothing")
		ops, more, err := l.SearchOperations(ctx, acme, models.Search{Limit: 1})
		require.NoError(t, err)
		assert.True(t, more)
		assert.Equal(t, []string{first.Op.ID}, search(acme, models.Search{Before: ops[0].ID}))
		_, _, err = l.SearchOperations(ctx, acme, models.Search{Limit: 10, State: "BOGUS"})
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err))

		_, err = l.OperationRecord(ctx, acme, theirs.Op.ID)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "another tenant's operation is not found")
		rec, err := l.OperationRecord(ctx, acme, first.Op.ID)
		require.NoError(t, err)
		assert.Len(t, rec.Events, 1)

		wf, err := l.WorkflowOperations(ctx, acme, "wf-acme")
		require.NoError(t, err)
		assert.Equal(t, []string{first.Op.ID, second.Op.ID}, []string{wf[0].ID, wf[1].ID}, "creation order")
		_, err = l.WorkflowOperations(ctx, acme, "wf-globex")
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))

		for _, op := range []*models.Operation{first.Op, theirs.Op} {
			_, err := l.OpenReview(ctx, op, models.ReasonManual, "user:ada@example.com")
			require.NoError(t, err)
		}
		items, _, err := l.ReviewQueue(ctx, acme, models.ReviewFilter{Limit: 10})
		require.NoError(t, err)
		require.Len(t, items, 1)
		assert.Equal(t, first.Op.ID, items[0].OperationID)
		assert.Equal(t, "order-1:refund", items[0].Key)
		items, _, err = l.ReviewQueue(ctx, models.AllTenants(), models.ReviewFilter{Limit: 10, Reason: models.ReasonUnknownOutcome})
		require.NoError(t, err)
		assert.Empty(t, items)
	})
}

func TestAPIKeyAdminReads(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		l, _ := consoleLedger(t, d)
		mine, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent", []string{"tickets.create"})
		require.NoError(t, err)
		theirs, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "globex", "agent", nil)
		require.NoError(t, err)
		acme := models.OnlyTenants("acme")

		rows, err := l.APIKeys(ctx, acme, "")
		require.NoError(t, err)
		require.Len(t, rows, 1)
		assert.Equal(t, mine.Key.Prefix, rows[0].Prefix)
		assert.Equal(t, "agent", rows[0].PrincipalName)

		_, err = l.RevokeAPIKeyByID(ctx, acme, models.Requester{Actor: "user:ann@example.com"}, theirs.Key.ID)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "outside scope")
		k, err := l.RevokeAPIKeyByID(ctx, acme, models.Requester{Actor: "user:ann@example.com"}, mine.Key.ID)
		require.NoError(t, err)
		assert.NotNil(t, k.RevokedAt)
		_, err = l.RevokeAPIKeyByID(ctx, acme, models.Requester{Actor: "user:ann@example.com"}, mine.Key.ID)
		assert.Equal(t, models.CodeConflict, models.ErrorCode(err))

		tenants, err := l.ScopedTenants(ctx, acme)
		require.NoError(t, err)
		require.Len(t, tenants, 1)
		assert.Equal(t, "acme", tenants[0].Name)
	})
}
