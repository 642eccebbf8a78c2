package models_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestASweepWritesEveryEventInOrder: a transaction that changes many operations at once (a
// claim of 600 due operations: 1,200 events, more than the end-of-transaction statement takes
// in one go) writes every event, each operation's in the order they happened.
func TestASweepWritesEveryEventInOrder(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		const n = 600
		for i := range n {
			_, err := l.Submit(ctx, newOp(c, fmt.Sprintf("due-%d", i)))
			require.NoError(t, err)
		}
		claimed, err := l.ClaimDue(ctx, "w1", n, func(string) time.Duration { return time.Minute })
		require.NoError(t, err)
		require.Len(t, claimed, n)
		for _, cl := range claimed {
			evs, err := l.Events(ctx, c.Tenant, cl.Op.ID)
			require.NoError(t, err)
			var types []string
			for _, e := range evs {
				types = append(types, e.Type)
			}
			assert.Equal(t, []string{models.EventCreated, models.EventStateChanged, models.EventAttemptStarted}, types, cl.Op.ID)
		}
	})
}
