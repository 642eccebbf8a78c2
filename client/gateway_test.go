package client_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/client"
	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var refund = map[string]any{"order_id": "o-1042", "amount_cents": 1999, "currency": "EUR"}

// TestAtMostOnceThroughLostAnswers: the downstream's answer to the gateway is lost (the
// gateway retries with its downstream key) and the gateway's answer to the client is lost (the
// client retries with its operation key): one operation, one ticket, one key end to end.
func TestAtMostOnceThroughLostAnswers(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/tickets", Method: http.MethodPost, Count: 1})
		proxy := gatewaytest.NewLossyProxy(t, g.URL, 1)
		c := newClient(t, proxy.URL, g.Key)

		op, err := c.Do(t.Context(), "tickets.create", ticket, client.Key("wf-1", "create-ticket"))
		require.NoError(t, err)
		assert.Equal(t, client.StateSucceeded, op.State)
		assert.True(t, op.Replayed, "the retry found the operation the lost request recorded")
		assert.Equal(t, 2, op.Attempts, "the gateway retried its lost downstream answer itself")
		assert.Equal(t, "wf-1", op.WorkflowRunID)
		assert.Equal(t, "create-ticket", op.StepID)

		keys := proxy.Keys()
		require.GreaterOrEqual(t, len(keys), 2)
		for _, k := range keys {
			assert.Equal(t, `"wf-1:create-ticket"`, k, "the client never made up a new key")
		}
		assert.Equal(t, int64(1), g.Count(t), "one operation")
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"), "one side effect")
		posts := g.Sandbox.Requests("/tickets")
		require.Len(t, posts, 2)
		for _, p := range posts {
			assert.Equal(t, op.DownstreamKey, p.Header.Get("Idempotency-Key"), "one downstream key")
		}
	})
}

// TestResumeAfterRestart: an agent whose answer was lost dies; the next process asks the
// ledger, finds the step done, and a repeat of the step changes nothing.
func TestResumeAfterRestart(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		proxy := gatewaytest.NewLossyProxy(t, g.URL, 1)
		key := client.Key("wf-2", "refund")

		dying := newClient(t, proxy.URL, g.Key, client.WithMaxAttempts(1))
		_, err := dying.Do(t.Context(), "refunds.issue", refund, key)
		require.Error(t, err, "the answer was lost and the agent gave up")
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"), "yet the refund happened")

		restarted := newClient(t, g.URL, g.Key)
		op, err := restarted.Resume(t.Context(), "refunds.issue", refund, key)
		require.NoError(t, err)
		assert.Equal(t, client.StateSucceeded, op.State)
		assert.Equal(t, key.Key, op.Key)
		_, err = restarted.Resume(t.Context(), "email.send", map[string]any{"to": "customer@example.com"}, client.Key("wf-2", "email"))
		require.ErrorIs(t, err, client.ErrNotFound, "a step never sent is not in the ledger")

		again, err := restarted.Do(t.Context(), "refunds.issue", refund, key)
		require.NoError(t, err)
		assert.Equal(t, op.ID, again.ID)
		assert.True(t, again.Replayed)
		assert.JSONEq(t, string(op.Result), string(again.Result))
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"), "still one refund")

		// Another refund under the step's key (an earlier run of another workflow that chose
		// the same run id): not this step's operation, as the gateway would answer a POST.
		other := map[string]any{"order_id": "o-2001", "amount_cents": 500, "currency": "EUR"}
		mismatched, err := restarted.Resume(t.Context(), "refunds.issue", other, key)
		require.ErrorIs(t, err, client.ErrKeyMismatch)
		assert.Equal(t, op.ID, mismatched.ID)
		_, err = restarted.Do(t.Context(), "refunds.issue", other, key)
		require.ErrorIs(t, err, client.ErrKeyMismatch, "the gateway agrees")
	})
}

// TestDoWaitsOutTheRateLimit: a 429 of a real gateway is retried with the same key after its
// Retry-After. The bucket refills once in four seconds, so the second call is refused however
// slowly a loaded machine runs the first (at one a second it was not, under load 20).
func TestDoWaitsOutTheRateLimit(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{RateLimit: 0.25, RateBurst: 1})
		var mu sync.Mutex
		var waits []time.Duration
		c := newClient(t, g.URL, g.Key, client.WithPause(func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			waits = append(waits, d)
			mu.Unlock()
			return client.Sleep(ctx, d) // the gateway's bucket refills in real time
		}))
		_, err := c.Do(t.Context(), "tickets.create", ticket, client.Key("wf-3", "first"))
		require.NoError(t, err)
		require.Empty(t, waits, "the first call is within the burst")
		op, err := c.Do(t.Context(), "tickets.create", map[string]any{"subject": "Second"}, client.Key("wf-3", "second"))
		require.NoError(t, err)
		assert.Equal(t, client.StateSucceeded, op.State)
		require.NotEmpty(t, waits, "the second call was rate-limited")
		for _, w := range waits {
			// The only refusals here are 429s with Retry-After: 1.
			assert.GreaterOrEqual(t, w, time.Second, "the second call waited out its Retry-After")
		}
		assert.Equal(t, int64(2), g.Count(t))
		assert.Equal(t, 2, g.Sandbox.Committed("tickets"))
	})
}
