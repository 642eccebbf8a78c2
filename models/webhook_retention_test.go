package models_test

import (
	"context"
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

// handClock is a clock the test moves.
type handClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *handClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *handClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// retentionWorld is a ledger on a hand clock with two subscriptions of tenant acme to
// operation.succeeded.
type retentionWorld struct {
	l     *models.Ledger
	clock *handClock
	c     *models.Caller
}

func newRetentionWorld(t *testing.T, d models.Dialect) *retentionWorld {
	t.Helper()
	cat, err := catalog.Load([]byte(webhookTools))
	require.NoError(t, err)
	clk := &handClock{t: time.Now().UTC().Truncate(time.Second)}
	l := models.New(models.Config{DB: testdb.Open(t, d), Dialect: d, Now: clk.Now, Payloads: opview.Payloads(cat)})
	ctx := context.Background()
	_, err = l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
	require.NoError(t, err)
	k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent", nil)
	require.NoError(t, err)
	c, err := l.Authenticate(ctx, k.Secret)
	require.NoError(t, err)
	subscribe(t, l, "acme", models.WebhookOperationSucceeded)
	subscribe(t, l, "acme", models.WebhookOperationSucceeded)
	return &retentionWorld{l: l, clock: clk, c: c}
}

// succeed records a succeeded operation: one message, one delivery per subscription.
func (w *retentionWorld) succeed(t *testing.T, key string) {
	t.Helper()
	cl := running(t, w.l, w.c, key)
	require.NoError(t, w.l.FinishAttempt(context.Background(), cl, "w1", succeeded))
}

// publish claims every due delivery and records, for each in turn, the next status of
// statuses (the publisher's decision).
func (w *retentionWorld) publish(t *testing.T, statuses ...string) []models.ClaimedDelivery {
	t.Helper()
	ctx := context.Background()
	claimed, err := w.l.ClaimDeliveries(ctx, "p1", 100, 10*time.Second)
	require.NoError(t, err)
	require.Len(t, claimed, len(statuses))
	for i, c := range claimed {
		out := models.DeliveryOutcome{StatusCode: 200, Status: statuses[i]}
		if statuses[i] != models.DeliveryDelivered {
			out = models.DeliveryOutcome{StatusCode: 500, Error: "the receiver answered 500", Status: statuses[i],
				NextAttemptAt: w.clock.Now().Add(100 * 24 * time.Hour)}
		}
		require.NoError(t, w.l.RecordDelivery(ctx, "p1", c, out))
	}
	return claimed
}

func count(t *testing.T, l *models.Ledger, table string) int {
	t.Helper()
	var n int
	require.NoError(t, l.DB().Raw("SELECT count(*) FROM "+table).Scan(&n).Error)
	return n
}

// The outbox is bounded by age: deliveries that ended (delivered or dead) are deleted, with
// their attempts, once older than the retention, and a message once none of its deliveries
// is left. Pending ones stay however old they are; a redelivery makes an ended one pending.
func TestEndedWebhookDeliveriesArePrunedPastRetention(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		w := newRetentionWorld(t, d)
		const retention = 24 * time.Hour
		prune := func(limit int) int {
			t.Helper()
			n, err := w.l.PruneWebhooks(ctx, w.clock.Now().Add(-retention), limit)
			require.NoError(t, err)
			return n
		}

		w.succeed(t, "one")
		first := w.publish(t, models.DeliveryDelivered, models.DeliveryDead)
		w.clock.Advance(time.Hour)
		w.succeed(t, "two")
		second := w.publish(t, models.DeliveryDelivered, models.DeliveryPending)
		require.Equal(t, 4, count(t, w.l, "webhook_deliveries"))
		require.Equal(t, 2, count(t, w.l, "outbox"))
		require.Equal(t, 4, count(t, w.l, "webhook_attempts"))

		w.clock.Advance(retention - 2*time.Hour)
		assert.Zero(t, prune(100), "nothing ended longer ago than the retention")

		// A day past the first two, not yet the next two: a redelivery takes the dead one
		// back; the delivered one goes.
		w.clock.Advance(2 * time.Hour)
		dead := first[1].Delivery
		require.Equal(t, models.DeliveryDead, deliveryStatus(t, w.l, dead.ID))
		_, err := w.l.Redeliver(ctx, models.AllTenants(), models.Requester{Actor: "user:admin@x"}, dead.ID)
		require.NoError(t, err)
		assert.Equal(t, 1, prune(100), "the delivered one; the redelivered one is pending again")
		assert.Empty(t, deliveryStatus(t, w.l, first[0].Delivery.ID), "the delivered one is gone")
		assert.Equal(t, 2, count(t, w.l, "outbox"), "each message still has a delivery")

		// The redelivery succeeds; a day later it goes, and its message with it.
		w.clock.Advance(time.Hour)
		w.publish(t, models.DeliveryDelivered) // the redelivered one; the pending one is not due yet
		w.clock.Advance(retention + time.Minute)
		assert.Equal(t, 1, prune(1), "one at a time: the limit holds")
		assert.Equal(t, 1, prune(100), "the second message's delivered one")
		assert.Zero(t, prune(100))

		rows := deliveriesLeft(t, w.l)
		require.Len(t, rows, 1, "the pending delivery stays, however old")
		assert.Equal(t, second[1].Delivery.ID, rows[0])
		assert.Equal(t, 1, count(t, w.l, "outbox"), "and so does its message")
		assert.Equal(t, 1, count(t, w.l, "webhook_attempts"), "the attempts of deleted deliveries went with them")
	})
}

func deliveryStatus(t *testing.T, l *models.Ledger, id string) string {
	t.Helper()
	var status string
	require.NoError(t, l.DB().Raw("SELECT status FROM webhook_deliveries WHERE id = ?", id).Scan(&status).Error)
	return status
}

func deliveriesLeft(t *testing.T, l *models.Ledger) []string {
	t.Helper()
	var ids []string
	require.NoError(t, l.DB().Raw("SELECT id FROM webhook_deliveries ORDER BY id").Scan(&ids).Error)
	return ids
}

// A redelivery starts a fresh window and counts its attempts afresh (what the publisher backs
// off by); attempts itself, the claim's fencing token, only grows.
func TestRedeliveryCountsItsAttemptsAfresh(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		w := newRetentionWorld(t, d)
		w.succeed(t, "one")
		for range 3 {
			w.publish(t, models.DeliveryPending, models.DeliveryPending)
			w.clock.Advance(101 * 24 * time.Hour) // past the retry publish scheduled
		}
		claimed := w.publish(t, models.DeliveryDead, models.DeliveryDead)
		require.Equal(t, 4, claimed[0].Delivery.Attempts)
		require.Equal(t, 4, claimed[0].Delivery.WindowAttempt())

		re, err := w.l.Redeliver(ctx, models.AllTenants(), models.Requester{Actor: "user:admin@x"}, claimed[0].Delivery.ID)
		require.NoError(t, err)
		assert.Nil(t, re.EndedAt)
		again, err := w.l.ClaimDeliveries(ctx, "p1", 100, 10*time.Second)
		require.NoError(t, err)
		require.Len(t, again, 1)
		assert.Equal(t, 5, again[0].Delivery.Attempts, "the fencing token grows")
		assert.Equal(t, 1, again[0].Delivery.WindowAttempt(), "the first attempt of the new window")
		assert.Equal(t, re.RedeliveredAt.UTC(), again[0].Delivery.WindowStart().UTC())
	})
}
