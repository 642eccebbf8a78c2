package jobs_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecideDelivery(t *testing.T) {
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	backoff := catalog.RetryPolicy{InitialBackoff: time.Second, MaxBackoff: 8 * time.Second}
	for _, tc := range []struct {
		name      string
		delivered bool
		attempt   int
		now       time.Time
		jitter    float64
		want      string
		next      time.Time
	}{
		{"2xx ends delivered", true, 1, start, 0.5, models.DeliveryDelivered, time.Time{}},
		{"2xx ends delivered even past the window", true, 9, start.Add(time.Hour), 0.5, models.DeliveryDelivered, time.Time{}},
		{"first failure waits the initial backoff", false, 1, start, 0.9, models.DeliveryPending, start.Add(time.Second)},
		{"third failure, no jitter: the floor", false, 3, start, 0, models.DeliveryPending, start.Add(time.Second)},
		{"third failure, full jitter: 4s", false, 3, start, 1, models.DeliveryPending, start.Add(4 * time.Second)},
		{"tenth failure is capped", false, 10, start, 1, models.DeliveryPending, start.Add(8 * time.Second)},
		{"a retry inside the window is scheduled", false, 2, start.Add(58 * time.Second), 0, models.DeliveryPending, start.Add(59 * time.Second)},
		{"a retry exactly at the window's end is scheduled", false, 1, start.Add(59 * time.Second), 0, models.DeliveryPending, start.Add(time.Minute)},
		{"a retry past the window: dead", false, 3, start.Add(58 * time.Second), 1, models.DeliveryDead, time.Time{}},
		{"attempt 0 counts as the first", false, 0, start, 1, models.DeliveryPending, start.Add(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := jobs.DecideDelivery(jobs.DeliveryInput{Delivered: tc.delivered, Attempt: tc.attempt, WindowStart: start,
				Window: time.Minute, Backoff: backoff, Now: tc.now, Jitter: tc.jitter})
			assert.Equal(t, tc.want, got.Status)
			assert.True(t, tc.next.Equal(got.NextAttemptAt), "next attempt %s, want %s", got.NextAttemptAt, tc.next)
		})
	}
}

func TestSignWebhookMatchesTheSpecExample(t *testing.T) {
	// The example of the Standard Webhooks specification (standard-webhooks.md, "Signature
	// scheme"): secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, this id, timestamp and body.
	key, err := models.WebhookKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	sig := jobs.SignWebhook(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	assert.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", sig)
}

func TestReceiverFailingTwiceGetsTheSameIDThreeTimes(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		clock := newClock()
		w := newWorld(t, d, testdb.Open(t, d), clock.Now)
		rcv := newReceiver(t, http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusNoContent)
		sub, secret := w.subscribe(t, rcv.srv.URL+"/hooks")
		rcv.setSecret(secret)
		op := w.succeed(t, "order-1")
		p := w.publisher("p1", clock.Now, nil)
		ctx := context.Background()

		for i, want := range []string{models.DeliveryPending, models.DeliveryPending, models.DeliveryDelivered} {
			n, err := p.PublishOnce(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n, "round %d sends the delivery", i+1)
			rows := w.deliveries(t)
			require.Len(t, rows, 1)
			assert.Equal(t, want, rows[0].Status)
			n, err = p.PublishOnce(ctx)
			require.NoError(t, err)
			assert.Zero(t, n, "nothing is due before the backoff passes")
			clock.Advance(10 * time.Second)
		}

		got := rcv.receipts()
		require.Len(t, got, 3)
		row := w.deliveries(t)[0]
		for _, r := range got {
			assert.Equal(t, row.OutboxID, r.ID, "webhook-id is the outbox id, stable across redeliveries")
			assert.True(t, strings.HasPrefix(r.ID, "msg_"))
			assert.Equal(t, string(got[0].Body), string(r.Body), "the body is the same message")
		}
		assert.Less(t, got[0].Timestamp, got[2].Timestamp, "each attempt is signed afresh")
		assert.Zero(t, rcv.forged)
		assert.Equal(t, sub.ID, row.SubscriptionID)
		assert.Equal(t, op.ID, row.OperationID)
		assert.NotNil(t, row.DeliveredAt)
		assert.Nil(t, row.LastError)

		att := w.attempts(t, row.ID)
		require.Len(t, att, 3)
		for i, code := range []int{500, 503, 204} {
			require.NotNil(t, att[i].StatusCode)
			assert.Equal(t, code, *att[i].StatusCode)
		}
		require.NotNil(t, att[0].Error)
		assert.Contains(t, *att[0].Error, "500")
		assert.Nil(t, att[2].Error)

		body := decodePayload(t, got[0].Body)
		assert.Equal(t, models.WebhookOperationSucceeded, body.Type)
		assert.Equal(t, "acme", body.Tenant)
		assert.Equal(t, op.ID, body.Data.Operation["id"])
		assert.Equal(t, "SUCCEEDED", body.Data.Operation["state"])
		assert.Equal(t, "***", body.Data.Operation["params"].(map[string]any)["card_number"])
		assert.NotContains(t, string(got[0].Body), cardNumber, "sensitive params never leave in clear")
		assert.NotContains(t, string(got[0].Body), secret)
		assert.NotContains(t, string(got[0].Body), "whsec_")
	})
}

func TestReceiverDownForTheWindowEndsDeadThenRedelivers(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		clock := newClock()
		w := newWorld(t, d, testdb.Open(t, d), clock.Now)
		rcv := newReceiver(t, http.StatusOK)
		down := rcv.srv.URL
		rcv.srv.Close() // down: connections refused for the whole window
		_, secret := w.subscribe(t, down+"/hooks")
		w.succeed(t, "order-2")
		p := w.publisher("p1", clock.Now, nil)
		ctx := context.Background()

		sends := 0
		for range 100 {
			n, err := p.PublishOnce(ctx)
			require.NoError(t, err)
			sends += n
			if w.deliveries(t)[0].Status != models.DeliveryPending {
				break
			}
			clock.Advance(5 * time.Second)
		}
		row := w.deliveries(t)[0]
		require.Equal(t, models.DeliveryDead, row.Status, "after the window the delivery is dead")
		assert.Greater(t, sends, 5, "it was retried within the window")
		assert.Less(t, sends, 60, "backoff spaced the retries")
		require.NotNil(t, row.LastError)
		assert.Contains(t, *row.LastError, "refused")
		assert.Len(t, w.attempts(t, row.ID), sends, "every attempt is recorded")

		dead, err := w.ledger.WebhookDeliveries(ctx, models.AllTenants(), models.DeliveryFilter{Status: models.DeliveryDead})
		require.NoError(t, err)
		require.Len(t, dead, 1, "the dead delivery is visible")
		n, err := p.PublishOnce(ctx)
		require.NoError(t, err)
		assert.Zero(t, n, "a dead delivery is not sent again by itself")

		// The receiver comes back (on another port: point the subscription there through a
		// fresh receiver and a redelivery of the same message).
		back := newReceiver(t, http.StatusOK)
		back.setSecret(secret)
		require.NoError(t, w.ledger.DB().Model(&models.WebhookSubscription{}).Where("id = ?", row.SubscriptionID).
			Update("url", back.srv.URL+"/hooks").Error)
		_, err = w.ledger.Redeliver(ctx, models.AllTenants(), models.Requester{Actor: "user:admin@x"}, row.ID)
		require.NoError(t, err)
		n, err = p.PublishOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		got := back.receipts()
		require.Len(t, got, 1)
		assert.Equal(t, row.OutboxID, got[0].ID, "a redelivery carries the same webhook-id")
		assert.Equal(t, models.DeliveryDelivered, w.deliveries(t)[0].Status)
	})
}

func TestCrashedPublisherLeadsToRedeliveryNeverLoss(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		clock := newClock()
		w := newWorld(t, d, testdb.Open(t, d), clock.Now)
		rcv := newReceiver(t, http.StatusOK)
		_, secret := w.subscribe(t, rcv.srv.URL)
		rcv.setSecret(secret)
		w.succeed(t, "order-3")
		ctx := context.Background()

		// A publisher claims the delivery and dies before recording anything.
		claimed, err := w.ledger.ClaimDeliveries(ctx, "crashed", 10, 30*time.Second)
		require.NoError(t, err)
		require.Len(t, claimed, 1)

		p := w.publisher("p2", clock.Now, nil)
		n, err := p.PublishOnce(ctx)
		require.NoError(t, err)
		assert.Zero(t, n, "while the dead publisher's lease runs, nobody else sends it")
		assert.Empty(t, rcv.receipts())

		clock.Advance(31 * time.Second)
		n, err = p.PublishOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n, "once the lease ran out, the delivery is sent again")
		got := rcv.receipts()
		require.Len(t, got, 1)
		row := w.deliveries(t)[0]
		assert.Equal(t, models.DeliveryDelivered, row.Status)
		assert.Equal(t, claimed[0].Delivery.OutboxID, got[0].ID)
		assert.Equal(t, 2, row.Attempts, "two claims")
		assert.Len(t, w.attempts(t, row.ID), 1, "only the live publisher recorded an attempt")

		// The dead publisher coming back can record nothing over what happened since.
		err = w.ledger.RecordDelivery(ctx, "crashed", claimed[0], models.DeliveryOutcome{Status: models.DeliveryDead, Error: "late"})
		assert.Equal(t, models.CodeStale, models.ErrorCode(err))
		assert.Equal(t, models.DeliveryDelivered, w.deliveries(t)[0].Status)
	})
}

func TestNeverSendsToADeletedSubscription(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		clock := newClock()
		w := newWorld(t, d, testdb.Open(t, d), clock.Now)
		rcv := newReceiver(t, http.StatusOK)
		sub, secret := w.subscribe(t, rcv.srv.URL)
		rcv.setSecret(secret)
		ctx := context.Background()
		p := w.publisher("p1", clock.Now, nil)

		// Deleted before the publisher looked: nothing is sent.
		w.succeed(t, "order-4")
		_, err := w.ledger.DeleteWebhook(ctx, models.AllTenants(), models.Requester{Actor: "cli"}, sub.ID)
		require.NoError(t, err)
		n, err := p.PublishOnce(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.Empty(t, rcv.receipts())
		row := w.deliveries(t)[0]
		assert.Equal(t, models.DeliveryDead, row.Status)
		_, err = w.ledger.Redeliver(ctx, models.AllTenants(), models.Requester{Actor: "user:a@x"}, row.ID)
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), "a deleted subscription's delivery cannot be redelivered")

		// Deleted while a publisher held the claim: its outcome cannot revive the delivery.
		sub2, _ := w.subscribe(t, rcv.srv.URL)
		w.succeed(t, "order-5")
		claimed, err := w.ledger.ClaimDeliveries(ctx, "p9", 10, time.Minute)
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		_, err = w.ledger.DeleteWebhook(ctx, models.AllTenants(), models.Requester{Actor: "cli"}, sub2.ID)
		require.NoError(t, err)
		err = w.ledger.RecordDelivery(ctx, "p9", claimed[0], models.DeliveryOutcome{Status: models.DeliveryPending, Error: "x",
			NextAttemptAt: clock.Now()})
		assert.Equal(t, models.CodeStale, models.ErrorCode(err))
		rows, err := w.ledger.WebhookDeliveries(ctx, models.AllTenants(), models.DeliveryFilter{SubscriptionID: sub2.ID})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		assert.Equal(t, models.DeliveryDead, rows[0].Status)
	})
}

// TestPublisherRefusesAPrivateTargetAtSendTime: a host that resolved to a public address when
// the subscription was made, and to loopback now (DNS rebinding), is not connected to.
func TestPublisherRefusesAPrivateTargetAtSendTime(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		clock := newClock()
		w := newWorld(t, d, testdb.Open(t, d), clock.Now)
		rcv := newReceiver(t, http.StatusOK)
		port := rcv.srv.URL[strings.LastIndex(rcv.srv.URL, ":"):]
		ctx := context.Background()
		_, err := w.ledger.CreateWebhook(ctx, models.AllTenants(), models.Requester{Actor: "cli"}, models.NewWebhook{Tenant: "acme",
			URL: "http://hooks.example.test" + port + "/", Events: []string{models.WebhookOperationSucceeded},
			Resolver: fakeDNS{"hooks.example.test": "93.184.216.34"}})
		require.NoError(t, err, "public when created")
		w.succeed(t, "order-6")

		p := w.publisher("p1", clock.Now, func(c *jobs.PublisherConfig) {
			c.Resolver = fakeDNS{"hooks.example.test": "127.0.0.1"}
		})
		n, err := p.PublishOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		assert.Empty(t, rcv.receipts(), "nothing reached the loopback receiver")
		row := w.deliveries(t)[0]
		assert.Equal(t, models.DeliveryPending, row.Status, "retried later: DNS may change back")
		require.NotNil(t, row.LastError)
		assert.Contains(t, *row.LastError, "loopback")
	})
}

// TestTwoPublishersDeliverEachRowOnce runs two publishers, each with its own connection pool,
// on one PostgreSQL, and counts what the receivers got.
func TestTwoPublishersDeliverEachRowOnce(t *testing.T) {
	dsn := testdb.DSN(t, models.Postgres)
	ctx := context.Background()
	open := func() *models.Ledger {
		db, d, err := models.Open(ctx, dsn)
		require.NoError(t, err)
		sqlDB, err := db.DB()
		require.NoError(t, err)
		t.Cleanup(func() { sqlDB.Close() })
		require.NoError(t, models.Migrate(ctx, db, d))
		return models.New(models.Config{DB: db, Dialect: d})
	}
	w := newWorld(t, models.Postgres, open().DB(), nil)
	second := &world{ledger: open(), caller: w.caller}

	a, b := newReceiver(t, http.StatusOK), newReceiver(t, http.StatusOK)
	_, sa := w.subscribe(t, a.srv.URL)
	_, sb := w.subscribe(t, b.srv.URL)
	a.setSecret(sa)
	b.setSecret(sb)
	const ops = 100
	for i := range ops {
		w.succeed(t, fmt.Sprintf("bulk-%03d", i))
	}

	// Each replica loops as Run does, counting what it claimed.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	claims := make([]int, 2)
	for i, l := range []*world{w, second} {
		p := l.publisher([]string{"replica-1", "replica-2"}[i], nil, func(c *jobs.PublisherConfig) {
			c.Concurrency, c.Timeout, c.LeaseMargin = 8, 5*time.Second, 30*time.Second
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for idle := 0; idle < 20 && rctx.Err() == nil; {
				n, err := p.PublishOnce(rctx)
				if !assert.NoError(t, err) {
					return
				}
				claims[i] += n
				if idle++; n > 0 {
					idle = 0
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("claims: replica-1 %d, replica-2 %d", claims[0], claims[1])
	assert.Equal(t, 2*ops, claims[0]+claims[1], "every delivery was claimed exactly once")

	for name, r := range map[string]*receiver{"a": a, "b": b} {
		counts := map[string]int{}
		for _, got := range r.receipts() {
			counts[got.ID]++
		}
		assert.Len(t, counts, ops, "receiver %s got every message", name)
		for id, n := range counts {
			assert.Equal(t, 1, n, "receiver %s got %s %d times", name, id, n)
		}
		assert.Zero(t, r.forged)
	}
	rows := w.deliveries(t)
	assert.Len(t, rows, 2*ops)
	for _, row := range rows {
		assert.Equal(t, models.DeliveryDelivered, row.Status)
		assert.Equal(t, 1, row.Attempts, "claimed once")
		assert.Len(t, w.attempts(t, row.ID), 1, "sent once")
	}
}

// TestPrivateTargetsAnswerIsNotKept: a subscription allowed a private target may point at a
// service inside the network; when it refuses a delivery, its answer (body and reason phrase)
// is not kept in the attempt's error, where the console would show it.
func TestPrivateTargetsAnswerIsNotKept(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		clock := newClock()
		w := newWorld(t, d, testdb.Open(t, d), clock.Now)
		const inside = "root-password=hunter2"
		internal := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			rw.WriteHeader(http.StatusForbidden)
			_, _ = rw.Write([]byte(inside))
		}))
		t.Cleanup(internal.Close)
		w.subscribe(t, internal.URL+"/admin")
		w.succeed(t, "order-7")

		n, err := w.publisher("p1", clock.Now, nil).PublishOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		row := w.deliveries(t)[0]
		att := w.attempts(t, row.ID)
		require.Len(t, att, 1)
		require.NotNil(t, att[0].StatusCode)
		assert.Equal(t, http.StatusForbidden, *att[0].StatusCode, "the status is kept")
		require.NotNil(t, att[0].Error)
		assert.Contains(t, *att[0].Error, "403")
		assert.NotContains(t, *att[0].Error, inside)
		require.NotNil(t, row.LastError)
		assert.NotContains(t, *row.LastError, inside)
	})
}
