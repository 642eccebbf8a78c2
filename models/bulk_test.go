package models_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A bulk selection takes, from ids that are the browser's to edit, only operations within the
// scope and in the state the action applies to, each as it is now, once.
func TestBulkPrepareTakesOnlyWhatScopeAndStateAllow(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		a, b, done := unknownOp(t, l, c, "a"), unknownOp(t, l, c, "b"), unknownOp(t, l, c, "c")
		_, err := l.MarkFailed(ctx, action(done, "ann@x"))
		require.NoError(t, err)
		sel := models.BulkSelection{By: models.Person{Actor: "user:ann@x"}, Action: models.ActionMarkFailed,
			IDs: []string{a.ID, "op_not_there", done.ID, b.ID, a.ID, " "}}

		got, err := l.PrepareBulk(ctx, models.OnlyTenants("acme"), sel)
		require.NoError(t, err)
		assert.Equal(t, models.BulkPrepared, got.Status)
		assert.Equal(t, 1, got.LeftOut, "the one already failed")
		assert.Equal(t, 1, got.Unseen, "the id that names nothing")
		read, err := l.BulkDecision(ctx, models.OnlyTenants("acme"), got.ID)
		require.NoError(t, err)
		require.Len(t, read.Items, 2)
		for i, op := range []*models.Operation{a, b} {
			it := read.Items[i]
			assert.Equal(t, []any{op.ID, "acme", op.Key, models.StateUnknown, op.Attempts, i + 1, ""},
				[]any{it.OperationID, it.Tenant, it.Key, it.ExpectedState, it.ExpectedAttempts, it.Seq, it.Outcome})
		}

		// Another tenant's reviewer reads none of acme's operations, and sees none in the run.
		other, err := l.PrepareBulk(ctx, models.OnlyTenants("globex"), sel)
		require.NoError(t, err)
		assert.Empty(t, other.Items)
		assert.Equal(t, 4, other.Unseen, "each distinct id once")
		read, err = l.BulkDecision(ctx, models.OnlyTenants("globex"), got.ID)
		require.NoError(t, err)
		assert.Empty(t, read.Items)

		_, err = l.PrepareBulk(ctx, models.AllTenants(), models.BulkSelection{By: models.Person{Actor: "user:ann@x"}, Action: models.ActionConfirmSucceeded, IDs: []string{a.ID}})
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), "a confirmation of success needs each one's reference")
		many := make([]string, models.BulkLimit+1)
		for i := range many {
			many[i] = fmt.Sprintf("op_%d", i)
		}
		_, err = l.PrepareBulk(ctx, models.AllTenants(), models.BulkSelection{By: models.Person{Actor: "user:ann@x"}, Action: models.ActionMarkFailed, IDs: many})
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err))
	})
}

// A prepared bulk decision is started once, however many posts race for it, by its actor
// only, with a reason, while its snapshot is fresh.
func TestBulkStartsOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		op := unknownOp(t, l, c, "a")
		prep := func() string {
			b, err := l.PrepareBulk(ctx, models.AllTenants(), models.BulkSelection{By: models.Person{Actor: "user:ann@x"}, Action: models.ActionMarkFailed, IDs: []string{op.ID}})
			require.NoError(t, err)
			return b.ID
		}
		id := prep()
		_, err := l.StartBulk(ctx, models.AllTenants(), models.Person{Actor: "user:ann@x"}, id, "  ", time.Hour)
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err))
		_, err = l.StartBulk(ctx, models.AllTenants(), models.Person{Actor: "user:bob@x"}, id, "mine now", time.Hour)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))

		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[models.Code]int{}
		for range 8 {
			wg.Go(func() {
				_, err := l.StartBulk(ctx, models.AllTenants(), models.Person{Actor: "user:ann@x"}, id, "outage 4711", time.Hour)
				mu.Lock()
				codes[models.ErrorCode(err)]++
				mu.Unlock()
			})
		}
		wg.Wait()
		assert.Equal(t, map[models.Code]int{"": 1, models.CodeStale: 7}, codes)
		got, err := l.BulkDecision(ctx, models.AllTenants(), id)
		require.NoError(t, err)
		assert.Equal(t, models.BulkApplying, got.Status)
		require.NoError(t, l.RecordBulkOutcome(ctx, id, 1, models.BulkDone, "Marked FAILED_FINAL."))
		require.NoError(t, l.FinishBulk(ctx, id))
		got, err = l.BulkDecision(ctx, models.AllTenants(), id)
		require.NoError(t, err)
		assert.Equal(t, []string{models.BulkApplied, "outage 4711", models.BulkDone}, []string{got.Status, *got.Reason, got.Items[0].Outcome})

		// A confirmation page left open too long is refused rather than decided on.
		_, err = l.StartBulk(ctx, models.AllTenants(), models.Person{Actor: "user:ann@x"}, prep(), "outage 4711", 0)
		assert.Equal(t, models.CodeStale, models.ErrorCode(err))
		assert.Contains(t, err.Error(), "prepared more than")
	})
}
