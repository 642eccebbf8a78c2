package jobs_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A delivery that went dead after many attempts is redelivered, and its receiver still
// fails: the next try comes after the first backoff, not after the capped one its attempt
// count would give.
func TestRedeliveryBacksOffAfresh(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		clock := newClock()
		w := newWorld(t, d, testdb.Open(t, d), clock.Now)
		rcv := newReceiver(t, http.StatusServiceUnavailable) // always refuses
		_, secret := w.subscribe(t, rcv.srv.URL+"/hooks")
		rcv.setSecret(secret)
		w.succeed(t, "order-1")
		p := w.publisher("p1", clock.Now, nil) // initial 1 s, max 8 s, jitter 0.5, window 1 min
		ctx := context.Background()
		for w.deliveries(t)[0].Status == models.DeliveryPending {
			_, err := p.PublishOnce(ctx)
			require.NoError(t, err)
			clock.Advance(8 * time.Second)
		}
		row := w.deliveries(t)[0]
		require.Equal(t, models.DeliveryDead, row.Status)
		require.Greater(t, row.Attempts, 4, "enough attempts that the backoff reached its cap")

		_, err := w.ledger.Redeliver(ctx, models.AllTenants(), models.Requester{Actor: "user:admin@x"}, row.ID)
		require.NoError(t, err)
		n, err := p.PublishOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		again := w.deliveries(t)[0]
		require.Equal(t, models.DeliveryPending, again.Status)
		assert.WithinDuration(t, clock.Now().Add(time.Second), again.NextAttemptAt, time.Millisecond,
			"the first retry of the new window waits the initial backoff (the capped one would be %s)",
			jobs.Backoff(catalog.RetryPolicy{InitialBackoff: time.Second, MaxBackoff: 8 * time.Second}, again.Attempts, 0.5))
	})
}

// The retention sweep deletes the webhook deliveries that ended longer ago than the
// configured retention, with their outbox messages; a negative retention keeps them.
func TestRetentionJobPrunesEndedWebhookDeliveries(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		clock := newClock()
		w := newWorld(t, d, testdb.Open(t, d), clock.Now)
		rcv := newReceiver(t, http.StatusOK)
		_, secret := w.subscribe(t, rcv.srv.URL+"/hooks")
		rcv.setSecret(secret)
		op := w.succeed(t, "order-1")
		ctx := context.Background()
		msgs, err := w.ledger.OutboxMessages(ctx, "acme", op.ID)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		n, err := w.publisher("p1", clock.Now, nil).PublishOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Len(t, rcv.receipts(), 1)
		require.Equal(t, models.DeliveryDelivered, w.deliveries(t)[0].Status)

		cat, err := catalog.Load([]byte(webhookCatalogue))
		require.NoError(t, err)
		exec := jobs.NewExecutor(jobs.ExecutorConfig{Ledger: w.ledger, Catalog: cat, Worker: "r1", Now: clock.Now,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		sweep := func(retention time.Duration) int {
			t.Helper()
			n, err := jobs.NewRecovery(exec, jobs.RecoveryConfig{WebhookRetention: retention}).RetainOnce(ctx)
			require.NoError(t, err)
			return n
		}
		clock.Advance(2 * time.Hour)
		assert.Zero(t, sweep(3*time.Hour), "ended two hours ago, kept three")
		assert.Zero(t, sweep(-1), "a negative retention keeps them forever")
		assert.Len(t, w.deliveries(t), 1)
		assert.Equal(t, 1, sweep(time.Hour))
		assert.Empty(t, w.deliveries(t))
		msgs, err = w.ledger.OutboxMessages(ctx, "acme", op.ID)
		require.NoError(t, err)
		assert.Empty(t, msgs, "the message went with its last delivery")
	})
}
