package models_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An approval whose window closes soon is announced once, as review.expiring with the time it
// lapses, by any number of sweeps together; before the warning window and after the lapse,
// nothing is.
func TestWarnExpiringApprovals(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		clk := &handClock{t: time.Now().UTC().Truncate(time.Second)}
		clock, advance := clk.Now, clk.Advance
		cat, err := catalog.Load([]byte(webhookTools))
		require.NoError(t, err)
		db := testdb.Open(t, d)
		// A ledger on the test's clock, over the same database webhookSetup seeded.
		_, _, c := webhookSetup(t, d, db)
		l := models.New(models.Config{DB: db, Dialect: d, Payloads: opview.Payloads(cat), Now: clock})
		subscribe(t, l, "acme", models.WebhookReviewExpiring)

		const ttl, warn = time.Hour, 10 * time.Minute
		in := newOp(c, "payout-1")
		in.NeedsApproval = true
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		sweep := func() int {
			n, err := l.WarnExpiringApprovals(ctx, []string{"tickets.create"}, ttl, warn, 100)
			require.NoError(t, err)
			return n
		}

		advance(49 * time.Minute)
		assert.Zero(t, sweep(), "11 minutes before the lapse: not yet")
		assert.Empty(t, announced(t, l, s.Op))

		advance(2 * time.Minute)
		var wg sync.WaitGroup
		var mu2 sync.Mutex
		total := 0
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := l.WarnExpiringApprovals(ctx, []string{"tickets.create"}, ttl, warn, 100)
				assert.NoError(t, err)
				mu2.Lock()
				total += n
				mu2.Unlock()
			}()
		}
		wg.Wait()
		assert.Equal(t, 1, total, "four sweeps together warn once")
		require.Equal(t, []string{models.WebhookReviewExpiring}, announced(t, l, s.Op))
		msgs, err := l.OutboxMessages(ctx, "acme", s.Op.ID)
		require.NoError(t, err)
		var body struct {
			Type string
			Data struct {
				Review struct {
					Status   string    `json:"status"`
					LapsesAt time.Time `json:"lapses_at"`
				}
			}
		}
		require.NoError(t, json.Unmarshal([]byte(msgs[0].Payload), &body))
		assert.Equal(t, "review.expiring", body.Type)
		assert.Equal(t, "open", body.Data.Review.Status)
		assert.True(t, s.Op.CreatedAt.Add(ttl).Equal(body.Data.Review.LapsesAt), "lapses_at %s", body.Data.Review.LapsesAt)

		advance(time.Minute)
		assert.Zero(t, sweep(), "warned once")

		// Another one, swept only after it lapsed: the lapse speaks for it, not a late warning.
		late := newOp(c, "payout-2")
		late.NeedsApproval = true
		s2, err := l.Submit(ctx, late)
		require.NoError(t, err)
		advance(ttl + time.Second)
		assert.Zero(t, sweep())
		assert.Empty(t, announced(t, l, s2.Op))

		n, err := l.WarnExpiringApprovals(ctx, []string{"tickets.create"}, ttl, -1, 100)
		require.NoError(t, err)
		assert.Zero(t, n, "a negative warning sends none")
	})
}
