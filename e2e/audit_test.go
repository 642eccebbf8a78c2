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

// TestAPIRefusalsAreAudited: every refused request worth investigating leaves an audit entry
// naming who, what and which operation (docs/AUDIT.md).
func TestAPIRefusalsAreAudited(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		first := g.Submit(t, "audit:1", "tickets.create", `{"subject":"a"}`, nil)
		require.Equal(t, http.StatusCreated, first.Status)
		opID := first.JSON(t)["id"].(string)
		narrow := g.NewTenant(t, "acme", "narrow", []string{"tickets.create"})

		cases := []struct {
			name, action, actor, operation string
			send                           func() gatewaytest.Response
			status                         int
		}{
			{"key mismatch", "api.key_mismatch", "api:agent", opID, func() gatewaytest.Response {
				return g.Submit(t, "audit:1", "tickets.create", `{"subject":"b"}`, nil)
			}, http.StatusUnprocessableEntity},
			{"forbidden tool", "api.tool_forbidden", "api:narrow", "", func() gatewaytest.Response {
				return g.Do(t, http.MethodPost, "/v1/operations", narrow, map[string]string{"Idempotency-Key": "audit:2"},
					`{"tool":"refunds.issue","params":{"order_id":"1","amount_cents":1,"currency":"EUR"}}`)
			}, http.StatusForbidden},
			{"unauthenticated", "api.unauthenticated", "anonymous:127.0.0.1", "", func() gatewaytest.Response {
				return g.Do(t, http.MethodGet, "/v1/operations/"+opID, "idg_"+"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", nil, "")
			}, http.StatusUnauthorized},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := tc.send()
				require.Equal(t, tc.status, resp.Status, string(resp.Body))
				var entries []models.AuditEntry
				require.NoError(t, g.Ledger.DB().Where("action = ?", tc.action).Find(&entries).Error)
				require.Len(t, entries, 1)
				e := entries[0]
				assert.Equal(t, tc.actor, e.Actor)
				assert.Equal(t, models.OutcomeRefused, e.Outcome)
				assert.Equal(t, tc.operation, e.OperationID)
				assert.Equal(t, resp.Header.Get("X-Request-Id"), e.RequestID)
			})
		}
		_, _, err := g.Ledger.VerifyAudit(t.Context())
		require.NoError(t, err)
	})
}
