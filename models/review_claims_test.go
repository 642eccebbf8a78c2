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

func TestReviewClaims(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		clk := &handClock{t: time.Now().UTC().Truncate(time.Second)}
		clock, advance := clk.Now, clk.Advance
		db := testdb.Open(t, d)
		_, _, c := webhookSetup(t, d, db)
		l := models.New(models.Config{DB: db, Dialect: d, Now: clock})
		ann := models.Requester{Actor: "user:ann@example.com"}
		bob := models.Requester{Actor: "user:bob@example.com"}
		acme := models.OnlyTenants("acme")

		var ops []*models.Operation
		for _, key := range []string{"a", "b"} {
			in := newOp(c, key)
			in.NeedsApproval = true
			s, err := l.Submit(ctx, in)
			require.NoError(t, err)
			ops = append(ops, s.Op)
		}
		queue := func(who models.Requester, claims string) []string {
			items, _, err := l.ReviewQueue(ctx, acme, models.ReviewFilter{Claims: claims, Viewer: who.Person(), Limit: 10})
			require.NoError(t, err)
			var keys []string
			for _, it := range items {
				keys = append(keys, it.Key)
			}
			return keys
		}

		r, err := l.ClaimReview(ctx, acme, ann, "acme", ops[0].ID, 30*time.Minute)
		require.NoError(t, err)
		holder, held := r.ClaimHolder(clock())
		assert.True(t, held)
		assert.Equal(t, "user:ann@example.com", holder.Actor)
		assert.Equal(t, []string{"a"}, queue(ann, models.ClaimsMine))
		assert.Empty(t, queue(bob, models.ClaimsMine))
		assert.Equal(t, []string{"b"}, queue(bob, models.ClaimsNone))

		_, err = l.ClaimReview(ctx, acme, bob, "acme", ops[0].ID, 30*time.Minute)
		require.Equal(t, models.CodeConflict, models.ErrorCode(err))
		assert.Contains(t, err.Error(), "ann@example.com has taken this review")
		_, err = l.ReleaseReview(ctx, acme, bob, "acme", ops[0].ID)
		assert.Equal(t, models.CodeConflict, models.ErrorCode(err), "only the claimant gives a live claim back")

		// A claim is a note, not a lock: bob may still decide.
		_, err = l.Approve(ctx, models.Action{Scope: acme, Tenant: "acme", OperationID: ops[0].ID, Actor: bob.Actor,
			Reason: "ok", ExpectedState: models.StateAwaitingApproval}, 2, time.Hour)
		require.NoError(t, err)

		advance(31 * time.Minute)
		assert.Empty(t, queue(ann, models.ClaimsMine), "a lapsed claim is no claim")
		assert.Equal(t, []string{"a", "b"}, queue(bob, models.ClaimsNone))
		r, err = l.ClaimReview(ctx, acme, bob, "acme", ops[0].ID, 0)
		require.NoError(t, err, "a lapsed claim can be taken")
		assert.Equal(t, clock().Add(models.DefaultClaimTTL), r.ClaimedUntil.UTC())
		_, err = l.ReleaseReview(ctx, acme, bob, "acme", ops[0].ID)
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "b"}, queue(ann, models.ClaimsNone))

		_, err = l.ClaimReview(ctx, models.OnlyTenants("other"), bob, "acme", ops[1].ID, 0)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "outside the scope there is nothing to claim")
		_, err = l.ClaimReview(ctx, models.Scope{}, bob, "acme", ops[1].ID, 0)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
		_, _, err = l.ReviewQueue(ctx, acme, models.ReviewFilter{Claims: "everyone's", Limit: 10})
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err))

		entries, _, err := l.AuditEntries(ctx, models.AllTenants(), models.AuditSearch{Action: models.AuditReviewClaim, Limit: 10})
		require.NoError(t, err)
		assert.Len(t, entries, 2, "each claim is audited")
	})
}

// An operation's version changes with what the console shows of it, and is not there for a
// scope without its tenant.
func TestOperationVersion(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		db := testdb.Open(t, d)
		l, _, c := webhookSetup(t, d, db)
		in := newOp(c, "payout")
		in.NeedsApproval = true
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		before, err := l.OperationVersion(ctx, models.OnlyTenants("acme"), s.Op.ID)
		require.NoError(t, err)
		again, err := l.OperationVersion(ctx, models.OnlyTenants("acme"), s.Op.ID)
		require.NoError(t, err)
		assert.Equal(t, before, again, "nothing changed")
		rec, err := l.OperationRecord(ctx, models.OnlyTenants("acme"), s.Op.ID)
		require.NoError(t, err)
		assert.Equal(t, before, rec.Version(), "the record's version is the one the page will be asked for")
		// An approval of two adds an event and leaves the row as it was.
		_, err = l.Approve(ctx, models.Action{Scope: models.AllTenants(), Tenant: "acme", OperationID: s.Op.ID,
			Actor: "user:ann@example.com", Reason: "ok", ExpectedState: models.StateAwaitingApproval}, 2, time.Hour)
		require.NoError(t, err)
		after, err := l.OperationVersion(ctx, models.OnlyTenants("acme"), s.Op.ID)
		require.NoError(t, err)
		assert.NotEqual(t, before, after, "a first approval changes what the page shows")
		_, err = l.OperationVersion(ctx, models.OnlyTenants("other"), s.Op.ID)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
		_, err = l.OperationVersion(ctx, models.AllTenants(), "op_missing")
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
	})
}

// The states and version of many operations: the version holds still while nothing changes,
// moves when one row does, and a scope without a tenant sees neither its operations nor their
// changes.
func TestOperationStates(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		db := testdb.Open(t, d)
		l, _, c := webhookSetup(t, d, db)
		var ids []string
		for _, key := range []string{"payout-1", "payout-2"} {
			in := newOp(c, key)
			in.NeedsApproval = true
			s, err := l.Submit(ctx, in)
			require.NoError(t, err)
			ids = append(ids, s.Op.ID)
		}
		acme := models.OnlyTenants("acme")
		states, before, err := l.OperationStates(ctx, acme, ids)
		require.NoError(t, err)
		assert.Equal(t, map[string]models.State{ids[0]: models.StateAwaitingApproval, ids[1]: models.StateAwaitingApproval}, states)
		_, again, err := l.OperationStates(ctx, acme, []string{ids[1], ids[0]})
		require.NoError(t, err)
		assert.Equal(t, before, again, "nothing changed, whatever the order asked in")

		_, err = l.Reject(ctx, models.Action{Scope: models.AllTenants(), Tenant: "acme", OperationID: ids[1],
			Actor: "user:ann@example.com", Reason: "not this one", ExpectedState: models.StateAwaitingApproval})
		require.NoError(t, err)
		states, after, err := l.OperationStates(ctx, acme, ids)
		require.NoError(t, err)
		assert.NotEqual(t, before, after, "a rejection changes what the page shows")
		assert.Equal(t, models.StateFailedFinal, states[ids[1]])

		states, other, err := l.OperationStates(ctx, models.OnlyTenants("other"), ids)
		require.NoError(t, err)
		assert.Empty(t, states, "another tenant's operations are not there")
		_, none, err := l.OperationStates(ctx, models.OnlyTenants("other"), nil)
		require.NoError(t, err)
		assert.Equal(t, none, other, "nor are their changes")
	})
}
