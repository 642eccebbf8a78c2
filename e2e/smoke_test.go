package e2e_test

import (
	"net/http"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRefundThenReplay(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		params := `{"order_id":"1042","amount_cents":1999,"currency":"EUR","card_number":"4242424242424242"}`
		first := g.Submit(t, "order-1042:refund", "refunds.issue", params, nil)
		require.Equal(t, http.StatusCreated, first.Status, string(first.Body))
		second := g.Submit(t, "order-1042:refund", "refunds.issue", params, nil)
		require.Equal(t, http.StatusOK, second.Status, string(second.Body))
		assert.Equal(t, "true", second.Header.Get("Idempotent-Replayed"))
		assert.JSONEq(t, string(first.Body), string(second.Body))
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"))
		assert.NotContains(t, string(first.Body), "4242424242424242")
	})
}
