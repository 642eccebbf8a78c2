package process_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An operation whose record passed its tool's retention keeps a tombstone: its key answers
// 410 idempotency-key-expired with the final state, forever, and never runs again.
func TestExpiredKeyAnswers410AndNeverRunsAgain(t *testing.T) {
	s := newStack(t, stackOptions{})
	a := s.serve(t, "A")

	r := s.mustPost(t, a.URL, "order-9:refund", "refunds.brief", refundParams, nil)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	id := r.id()
	require.Equal(t, "SUCCEEDED", r.obj(t)["state"])
	completed := s.row(t, id).CompletedAt
	require.NotNil(t, completed)

	// serve sweeps retention when it starts and then once a minute; a worker started after the
	// one-second retention has passed sweeps at once, and proves the sweep is safe beside a
	// serving replica.
	time.Sleep(time.Until(completed.Add(1100 * time.Millisecond)))
	s.worker(t, "W")
	took := s.waitRow(t, id, "the record to be purged", 30*time.Second, func(op *models.Operation) bool { return op.PurgedAt != nil })
	t.Logf("purged %s after the worker started", took.Round(time.Millisecond))

	got := s.op(t, a.URL, id)
	assert.Nil(t, got["params"], "params dropped")
	assert.Nil(t, got["result"], "result dropped")
	assert.Equal(t, "SUCCEEDED", got["state"], "the tombstone keeps the final state")
	assert.Equal(t, r.obj(t)["fingerprint"], got["fingerprint"], "and the fingerprint")

	// The serving replica learns of the worker's purge by a notification: until it arrives (a
	// few milliseconds; longer on a loaded machine) a replay there answers as it did just before
	// the purge (models/replaycache.go), and never runs anything again.
	took = eventually(t, 10*time.Second, "the serving replica to hear the purge", func() (bool, string) {
		r := s.mustPost(t, a.URL, "order-9:refund", "refunds.brief", refundParams, nil)
		return r.Status == http.StatusGone, fmt.Sprintf("%d", r.Status)
	})
	t.Logf("the serving replica answered 410 %s after the purge was read", took.Round(time.Millisecond))
	for i, params := range []string{refundParams, `{"order_id":"o-other","amount_cents":1,"currency":"EUR"}`} {
		again := s.mustPost(t, a.URL, "order-9:refund", "refunds.brief", params, nil)
		require.Equal(t, http.StatusGone, again.Status, "request %d: %s", i, again.Body)
		assert.Equal(t, "application/problem+json", again.Header.Get("Content-Type"))
		p := again.obj(t)
		assert.Equal(t, "/problems/idempotency-key-expired", p["type"])
		assert.Equal(t, "SUCCEEDED", p["state"])
		assert.Equal(t, id, p["operation_id"])
		assert.Equal(t, false, p["safe_to_retry_with_new_key"])
	}

	// Nothing ever runs again: give both processes' dispatchers and sweeps many rounds.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		require.Equal(t, 1, s.sb.Committed("refunds"), "re-executed")
		time.Sleep(50 * time.Millisecond)
	}
	assert.Equal(t, 1, s.count("/refunds", "POST"), "one POST ever")
	op := s.row(t, id)
	assert.EqualValues(t, 1, op.Attempts)
	var n int64
	require.NoError(t, s.ledger.DB().Model(&models.Operation{}).Count(&n).Error)
	assert.EqualValues(t, 1, n, "no new operation was recorded for the expired key")
}
