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
	"gorm.io/gorm"
)

// Regression tests for what model-checking the protocol (docs/model) found.

// retryOfAmbiguous records an operation whose first attempt was ambiguous and which is PENDING
// again, as a tool whose downstream honours keys retries it.
func retryOfAmbiguous(t *testing.T, l *models.Ledger, c *models.Caller, key string) *models.Operation {
	t.Helper()
	ctx := context.Background()
	in := newOp(c, key)
	in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
	s, err := l.Submit(ctx, in)
	require.NoError(t, err)
	require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", models.AttemptOutcome{
		Class: models.ErrorAmbiguous, To: models.StatePending, NextAttemptAt: time.Now().Add(-time.Second), ErrorMessage: "timeout"}))
	require.True(t, s.Op.Ambiguous)
	return s.Op
}

// A 4xx answer to the retry of an ambiguous attempt says nothing about the first attempt,
// which may have committed (a downstream that checks faults before keys answers 422 to a key
// it has already used): the operation stays UNKNOWN, never FAILED_FINAL.
func TestRefusedRetryOfAmbiguousAttemptStaysUnknown(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		op := retryOfAmbiguous(t, l, c, "refused-retry")
		claimed, err := l.ClaimDue(ctx, "w2", 10, func(string) time.Duration { return time.Minute })
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		require.Equal(t, 2, claimed[0].Attempt.Number)
		require.NoError(t, l.FinishAttempt(ctx, claimed[0], "w2", models.AttemptOutcome{Class: models.ErrorRejected,
			DownstreamStatus: 422, To: models.StateFailedFinal, ErrorClass: models.ErrorRejected, ErrorMessage: "rejected"}))

		got, err := l.Get(ctx, c.Tenant, op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateUnknown, got.State, "the first attempt may have taken effect")
		assert.True(t, got.Ambiguous)
		assert.Equal(t, models.ErrorAmbiguous, *got.ErrorClass)
	})
}

// Cancel refuses a PENDING retry of an ambiguous attempt: FAILED_FINAL (cancelled) would say
// nothing was done, when the first attempt may have been.
func TestCancelRefusesRetryOfAmbiguousAttempt(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		op := retryOfAmbiguous(t, l, c, "cancel-ambiguous")
		_, err := l.Cancel(ctx, c.Tenant, op.ID, "api:agent")
		require.Equal(t, models.CodeNotCancellable, models.ErrorCode(err), "%v", err)
		got, err := l.Get(ctx, c.Tenant, op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StatePending, got.State, "nothing changed")

		// A PENDING operation that never ran ambiguously is still cancellable.
		fresh, err := l.Submit(ctx, newOp(c, "cancel-fresh"))
		require.NoError(t, err)
		cancelled, err := l.Cancel(ctx, c.Tenant, fresh.Op.ID, "api:agent")
		require.NoError(t, err)
		assert.Equal(t, models.StateFailedFinal, cancelled.State)
	})
}

// A reviewer's action is checked against the attempt count the reviewer saw: the operation
// may have been retried meanwhile and be UNKNOWN again through an attempt nobody looked into.
// Confirming "not executed" then would repeat an effect the second attempt may have made.
func TestReviewActionRefusedAfterANewAttempt(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		op := unknownOp(t, l, c, "review-stale")
		seen := action(op, "ann@x") // UNKNOWN after attempt 1

		// Meanwhile attempt 1 is found not executed, attempt 2 runs and is ambiguous.
		_, err := l.ConfirmNotExecuted(ctx, action(op, "bob@x"))
		require.NoError(t, err)
		claimed, err := l.ClaimDue(ctx, "w2", 10, func(string) time.Duration { return time.Minute })
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		require.NoError(t, l.FinishAttempt(ctx, claimed[0], "w2", models.AttemptOutcome{Class: models.ErrorAmbiguous,
			To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous, ErrorMessage: "timeout"}))

		_, err = l.ConfirmNotExecuted(ctx, seen)
		require.Equal(t, models.CodeStale, models.ErrorCode(err), "ann saw attempt 1, not attempt 2: %v", err)
		got, err := l.Get(ctx, c.Tenant, op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateUnknown, got.State)
		assert.Equal(t, 2, got.Attempts)

		// With the count she sees now, her decision applies.
		seen.ExpectedAttempts = 2
		_, err = l.MarkFailed(ctx, seen)
		require.NoError(t, err)
	})
}

// waitForLockWait waits until a session of this database waits on a lock (PostgreSQL).
func waitForLockWait(t *testing.T, db *gorm.DB) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		var n int64
		require.NoError(t, db.Raw("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n).Error)
		if n > 0 {
			return
		}
	}
	t.Fatal("nothing ever waited on a lock")
}

// FinishAttempt takes the operation's row before its attempt's, as the lease reaper does. The
// reaper holds the operation (FOR UPDATE) and then closes the attempt; a FinishAttempt that
// updated the attempt first and then waited for the operation deadlocked with it.
func TestFinishAttemptAndReaperTakeLocksInOneOrder(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		in := newOp(c, "lock-order")
		in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: -time.Second} // expired at once
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		claimed := models.Claimed{Op: s.Op, Attempt: s.Attempt}
		outcome := models.AttemptOutcome{Class: "succeeded", To: models.StateSucceeded, Result: []byte(`{"id":"T-1"}`)}

		if d != models.Postgres {
			// One writer at a time: the reaper first, then the late outcome is stale.
			n, err := l.ReapExpiredLeases(ctx, "w2", 10)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Equal(t, models.CodeStale, models.ErrorCode(l.FinishAttempt(ctx, claimed, "w1", outcome)))
			return
		}
		// The reaper's transaction, statement by statement (ReapExpiredLeases): hold the
		// operation, let FinishAttempt start and wait, then close the attempt.
		tx := l.DB().Begin()
		require.NoError(t, tx.Error)
		defer tx.Rollback()
		require.NoError(t, tx.Exec("SELECT id FROM operations WHERE id = ? FOR UPDATE SKIP LOCKED", s.Op.ID).Error)
		var finishErr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			finishErr = l.FinishAttempt(ctx, claimed, "w1", outcome)
		}()
		waitForLockWait(t, l.DB())
		require.NoError(t, tx.Exec("UPDATE attempts SET finished_at = now(), class = 'ambiguous' WHERE operation_id = ? AND finished_at IS NULL",
			s.Op.ID).Error, "the reaper closes the attempt without deadlocking")
		require.NoError(t, tx.Exec("UPDATE operations SET state = 'UNKNOWN', ambiguous = true, lease_owner = NULL, lease_expires_at = NULL WHERE id = ?",
			s.Op.ID).Error)
		require.NoError(t, tx.Commit().Error)
		wg.Wait()
		assert.Equal(t, models.CodeStale, models.ErrorCode(finishErr), "the late outcome is dropped, not a deadlock: %v", finishErr)
		got, err := l.Get(ctx, c.Tenant, s.Op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateUnknown, got.State)
	})
}

// An escalator that loses the race to open a review (another one inserted it between its
// check and its insert) reports CodeStale, which the escalator skips, not a failure.
func TestOpenReviewLostRaceIsStale(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		op := unknownOp(t, l, c, "escalate-race")
		if d != models.Postgres {
			_, err := l.OpenReview(ctx, op, models.ReasonUnknownOutcome, "worker:w1")
			require.NoError(t, err)
			_, err = l.OpenReview(ctx, op, models.ReasonUnknownOutcome, "worker:w2")
			require.Equal(t, models.CodeStale, models.ErrorCode(err))
			return
		}
		// The other escalator's insert, not yet committed: ours passes its check, then waits
		// on the unique index of open reviews.
		tx := l.DB().Begin()
		require.NoError(t, tx.Error)
		defer tx.Rollback()
		require.NoError(t, tx.Create(&models.Review{ID: "rev_other", Tenant: op.Tenant, OperationID: op.ID,
			Reason: models.ReasonUnknownOutcome, Status: models.ReviewOpen, OpenedAt: time.Now(), OpenedBy: "worker:w2"}).Error)
		var openErr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, openErr = l.OpenReview(ctx, op, models.ReasonUnknownOutcome, "worker:w1")
		}()
		waitForLockWait(t, l.DB())
		require.NoError(t, tx.Commit().Error)
		wg.Wait()
		assert.Equal(t, models.CodeStale, models.ErrorCode(openErr), "%v", openErr)
	})
}

// An outcome for an attempt whose row is no longer open (closed by a reaper of a ledger this
// one was restored from, or an attempt lost with an asynchronous standby) records nothing,
// even though the operation is still RUNNING under the same fencing token: the fence alone is
// not proof of the claim. The operation keeps its state and its events, the attempt its row,
// and the caller's copy of the operation is left as it was.
func TestFinishAttemptOfAClosedAttemptRecordsNothing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		in := newOp(c, "closed-attempt")
		in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		require.NoError(t, l.DB().Exec("UPDATE attempts SET finished_at = ?, class = 'ambiguous' WHERE id = ?", time.Now().UTC(), s.Attempt.ID).Error)
		var eventsBefore int64
		require.NoError(t, l.DB().Model(&models.Event{}).Where("operation_id = ?", s.Op.ID).Count(&eventsBefore).Error)

		err = l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", succeeded)
		require.Equal(t, models.CodeStale, models.ErrorCode(err), "%v", err)
		assert.Equal(t, models.StateRunning, s.Op.State, "the caller's copy is not changed")
		got, err := l.Get(ctx, c.Tenant, s.Op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateRunning, got.State)
		assert.Nil(t, got.Result)
		var eventsAfter int64
		require.NoError(t, l.DB().Model(&models.Event{}).Where("operation_id = ?", s.Op.ID).Count(&eventsAfter).Error)
		assert.Equal(t, eventsBefore, eventsAfter, "no event of the dropped outcome")
		var class string
		require.NoError(t, l.DB().Raw("SELECT class FROM attempts WHERE id = ?", s.Attempt.ID).Scan(&class).Error)
		assert.Equal(t, "ambiguous", class, "the attempt keeps what closed it")
	})
}
