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

// TestPurgeLeavesATombstoneAndRedactsPayloads: past retention, params and results go — from
// the operation and from the webhook payloads that copied them — and the tombstone stays.
func TestPurgeLeavesATombstoneAndRedactsPayloads(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		in := newOp(c, "old")
		in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1",
			models.AttemptOutcome{Class: "succeeded", To: models.StateSucceeded, Result: []byte(`{"secret":"r"}`)}))
		require.NoError(t, l.DB().Exec(`INSERT INTO outbox (id, tenant, event_type, operation_id, occurred_at, payload, created_at)
			VALUES ('msg_1', 'acme', 'operation.succeeded', ?, ?, '{"data":{"result":{"secret":"r"}}}', ?)`, s.Op.ID, time.Now().UTC(), time.Now().UTC()).Error)

		n, err := l.Purge(ctx, []string{in.Tool}, time.Now().Add(-time.Hour), 10)
		require.NoError(t, err)
		assert.Zero(t, n, "not yet past retention")
		n, err = l.Purge(ctx, []string{in.Tool}, time.Now().Add(time.Hour), 10)
		require.NoError(t, err)
		assert.Equal(t, 1, n)

		got, err := l.Get(ctx, "acme", s.Op.ID)
		require.NoError(t, err)
		assert.Nil(t, got.Params)
		assert.Nil(t, got.Result)
		assert.NotNil(t, got.PurgedAt)
		assert.Equal(t, models.StateSucceeded, got.State)
		var payload string
		require.NoError(t, l.DB().Raw("SELECT payload FROM outbox WHERE id = 'msg_1'").Scan(&payload).Error)
		assert.NotContains(t, payload, "secret")
		assert.Contains(t, payload, `"type":"operation.succeeded"`)

		_, err = l.Submit(ctx, newOp(c, "old"))
		assert.Equal(t, models.CodeKeyExpired, models.ErrorCode(err))
	})
}
