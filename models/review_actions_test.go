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

// unknownOp records an operation and drives it to UNKNOWN, as an ambiguous attempt would.
func unknownOp(t *testing.T, l *models.Ledger, c *models.Caller, key string) *models.Operation {
	t.Helper()
	ctx := context.Background()
	in := newOp(c, key)
	in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
	s, err := l.Submit(ctx, in)
	require.NoError(t, err)
	require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", models.AttemptOutcome{
		Class: "ambiguous", To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous, ErrorMessage: "timeout"}))
	return s.Op
}

func action(op *models.Operation, who string) models.Action {
	return models.Action{Scope: models.AllTenants(), Tenant: op.Tenant, OperationID: op.ID, Actor: "user:" + who, Reason: "checked the downstream", ExpectedState: op.State, ExpectedAttempts: op.Attempts}
}

func TestReviewerSettlesUnknown(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()

		op := unknownOp(t, l, c, "a")
		got, err := l.ConfirmSucceeded(ctx, action(op, "ann@x"), "T-9", []byte(`{"id":"T-9"}`))
		require.NoError(t, err)
		assert.Equal(t, models.StateSucceeded, got.State)
		assert.Equal(t, "T-9", *got.DownstreamRef)

		op = unknownOp(t, l, c, "b")
		got, err = l.ConfirmNotExecuted(ctx, action(op, "ann@x"))
		require.NoError(t, err)
		assert.Equal(t, models.StatePending, got.State)
		require.NotNil(t, got.NextAttemptAt)

		op = unknownOp(t, l, c, "c")
		got, err = l.MarkFailed(ctx, action(op, "ann@x"))
		require.NoError(t, err)
		assert.Equal(t, models.StateFailedFinal, got.State)
		assert.Equal(t, models.ErrorRejectedByReviewer, *got.ErrorClass)

		// An action on an operation that moved meanwhile is refused, and changes nothing.
		_, err = l.MarkFailed(ctx, action(op, "bob@x"))
		assert.Equal(t, models.CodeStale, models.ErrorCode(err))
		stale := action(unknownOp(t, l, c, "d"), "ann@x")
		stale.ExpectedState = models.StatePending
		_, err = l.ConfirmNotExecuted(ctx, stale)
		assert.Equal(t, models.CodeStale, models.ErrorCode(err))

		// A reason is required.
		noReason := action(unknownOp(t, l, c, "e"), "ann@x")
		noReason.Reason = "  "
		_, err = l.MarkFailed(ctx, noReason)
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err))
	})
}

func TestApprovalsNeedDistinctReviewers(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		in := newOp(c, "payout")
		in.NeedsApproval = true
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		require.Equal(t, models.StateAwaitingApproval, s.Op.State)
		require.NotNil(t, s.Op.Review)
		assert.Equal(t, models.ReasonApprovalRequired, s.Op.Review.Reason)

		res, err := l.Approve(ctx, action(s.Op, "ann@x"), 2, time.Hour)
		require.NoError(t, err)
		assert.Equal(t, 1, res.Count)
		assert.Equal(t, models.StateAwaitingApproval, res.Op.State)

		_, err = l.Approve(ctx, action(s.Op, "ann@x"), 2, time.Hour)
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), "the same reviewer counts once")

		res, err = l.Approve(ctx, action(s.Op, "bob@x"), 2, time.Hour)
		require.NoError(t, err)
		assert.Equal(t, 2, res.Count)
		assert.Equal(t, models.StatePending, res.Op.State)

		got, err := l.Get(ctx, "acme", s.Op.ID)
		require.NoError(t, err)
		require.NotNil(t, got.Review)
		assert.Equal(t, models.ReviewResolved, got.Review.Status)
	})
}

func TestCompensationNeedsAnotherReviewer(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		orig := newOp(c, "ticket")
		orig.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
		s, err := l.Submit(ctx, orig)
		require.NoError(t, err)
		require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1",
			models.AttemptOutcome{Class: "succeeded", To: models.StateSucceeded, Result: []byte(`{"id":"T-1"}`)}))

		comp := newOp(c, "compensate:"+s.Op.ID)
		comp.Compensates, comp.NeedsApproval, comp.ReviewReason = s.Op.ID, true, models.ReasonCompensationApproval
		comp.Actor, comp.PrincipalID, comp.APIKeyID = "user:ann@x", "user:ann@x", ""
		cs, err := l.Submit(ctx, comp)
		require.NoError(t, err)

		_, err = l.Approve(ctx, action(cs.Op, "ann@x"), 1, time.Hour)
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), "the proposer cannot approve")
		res, err := l.Approve(ctx, action(cs.Op, "bob@x"), 1, time.Hour)
		require.NoError(t, err)
		assert.Equal(t, models.StatePending, res.Op.State)

		got, err := l.Get(ctx, "acme", s.Op.ID)
		require.NoError(t, err)
		assert.Equal(t, cs.Op.ID, *got.CompensatedBy)
	})
}

func TestApprovalLapses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		in := newOp(c, "slow-approval")
		in.NeedsApproval = true
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		n, err := l.LapseApprovals(ctx, "w", []string{in.Tool}, time.Hour, 10)
		require.NoError(t, err)
		assert.Zero(t, n)
		time.Sleep(20 * time.Millisecond)
		n, err = l.LapseApprovals(ctx, "w", []string{in.Tool}, 10*time.Millisecond, 10)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		got, err := l.Get(ctx, "acme", s.Op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateFailedFinal, got.State)
		_, err = l.Approve(ctx, action(s.Op, "ann@x"), 1, time.Hour)
		assert.Equal(t, models.CodeStale, models.ErrorCode(err))
	})
}
