package e2e_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTenantsAreIsolated: the same key in another tenant is another operation, and neither
// tenant can read, follow or cancel the other's, which answers exactly like a missing one.
func TestTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		other := g.NewTenant(t, "globex", "agent", nil)

		// A payout waits for approval, so a cancel by the wrong tenant would have something to
		// cancel.
		a := g.Submit(t, "shared-key", "payments.payout", payoutParams, nil)
		opA := requireOp(t, a, http.StatusAccepted)
		b := submitAs(t, g, other, "shared-key", "payments.payout", payoutParams, nil)
		opB := requireOp(t, b, http.StatusAccepted)
		idA, idB := opA["id"].(string), opB["id"].(string)
		assert.NotEqual(t, idA, idB, "another tenant's same key is its own operation")
		assert.Equal(t, opA["fingerprint"], opB["fingerprint"])
		assert.EqualValues(t, 2, g.Count(t))

		// Each tenant's ?key= finds its own.
		for _, c := range []struct{ apiKey, id string }{{g.Key, idA}, {other, idB}} {
			r := g.Do(t, http.MethodGet, "/v1/operations?key=shared-key", c.apiKey, nil, "")
			assert.Equal(t, c.id, requireOp(t, r, http.StatusOK)["id"])
		}
		// A key only tenant A used.
		onlyA := requireOp(t, g.Submit(t, "only-in-acme", "tickets.create", ticketParams, nil), http.StatusCreated)
		idOnlyA := onlyA["id"].(string)

		missing := models.NewOperationID()
		probes := []struct{ name, method, path string }{
			{"get", http.MethodGet, "/v1/operations/%s"},
			{"events", http.MethodGet, "/v1/operations/%s/events"},
			{"cancel", http.MethodPost, "/v1/operations/%s/cancel"},
			{"compensate", http.MethodPost, "/v1/operations/%s/compensate"},
		}
		for _, dir := range []struct {
			name      string
			apiKey    string
			foreignID string
		}{{"globex reads acme", other, idA}, {"acme reads globex", g.Key, idB}, {"globex reads acme ticket", other, idOnlyA}} {
			for _, p := range probes {
				t.Run(dir.name+" "+p.name, func(t *testing.T) {
					foreign := g.Do(t, p.method, fmt.Sprintf(p.path, dir.foreignID), dir.apiKey, nil, "")
					absent := g.Do(t, p.method, fmt.Sprintf(p.path, missing), dir.apiKey, nil, "")
					pf := requireProblem(t, g, foreign, http.StatusNotFound, "not-found")
					requireProblem(t, g, absent, http.StatusNotFound, "not-found")
					assert.JSONEq(t, string(absent.Body), string(foreign.Body), "another tenant's operation must look missing")
					assert.NotContains(t, pf, "operation_id")
					assert.NotContains(t, string(foreign.Body), dir.foreignID)
				})
			}
		}
		t.Run("by key", func(t *testing.T) {
			foreign := g.Do(t, http.MethodGet, "/v1/operations?key="+url.QueryEscape("only-in-acme"), other, nil, "")
			absent := g.Do(t, http.MethodGet, "/v1/operations?key=never-used", other, nil, "")
			requireProblem(t, g, foreign, http.StatusNotFound, "not-found")
			requireProblem(t, g, absent, http.StatusNotFound, "not-found")
			assert.JSONEq(t, string(absent.Body), string(foreign.Body))
		})
		t.Run("lists", func(t *testing.T) {
			r := g.Do(t, http.MethodGet, "/v1/operations", other, nil, "")
			require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
			assert.NotContains(t, string(r.Body), idA)
			assert.NotContains(t, string(r.Body), idOnlyA)
			assert.Contains(t, string(r.Body), idB)
		})

		// Nothing the other tenant tried changed anything.
		assert.Equal(t, "AWAITING_APPROVAL", requireOp(t, getOp(t, g, g.Key, idA), http.StatusOK)["state"])
		assert.Equal(t, "AWAITING_APPROVAL", requireOp(t, getOp(t, g, other, idB), http.StatusOK)["state"])
		assert.Nil(t, requireOp(t, getOp(t, g, g.Key, idOnlyA), http.StatusOK)["compensated_by"])
		assert.EqualValues(t, 3, g.Count(t))
		assert.Equal(t, 0, g.Sandbox.Committed("refunds"))
		assert.Equal(t, 0, g.Sandbox.Committed("closes"))
	})
}

// TestForbiddenToolLeaksNothing: a key limited to tickets.create may not use refunds.issue,
// not even to replay a refund its tenant already made, and cannot see that refund.
func TestForbiddenToolLeaksNothing(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		limited := g.NewTenant(t, "acme", "ticket-bot", []string{"tickets.create"})

		refund := g.Submit(t, "order-1042:refund", "refunds.issue", refundParams, nil)
		op := requireOp(t, refund, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"])
		id := op["id"].(string)
		requests, ops := len(g.Sandbox.Requests("")), g.Count(t)

		t.Run("replay of an existing refund", func(t *testing.T) {
			r := submitAs(t, g, limited, "order-1042:refund", "refunds.issue", refundParams, nil)
			p := requireProblem(t, g, r, http.StatusForbidden, "tool-forbidden")
			assert.NotContains(t, p, "operation_id")
			for _, leak := range []string{id, "R-5001", "SUCCEEDED", "o-1042", "1999"} {
				assert.NotContains(t, string(r.Body), leak)
			}
		})
		t.Run("new refund", func(t *testing.T) {
			r := submitAs(t, g, limited, "limited:refund", "refunds.issue", refundParams, nil)
			requireProblem(t, g, r, http.StatusForbidden, "tool-forbidden")
		})
		t.Run("new refund spelled with __", func(t *testing.T) {
			r := submitAs(t, g, limited, "limited:refund2", "refunds__issue", refundParams, nil)
			requireProblem(t, g, r, http.StatusForbidden, "tool-forbidden")
		})
		t.Run("reads", func(t *testing.T) {
			absent := models.NewOperationID()
			for _, path := range []string{"/v1/operations/%s", "/v1/operations/%s/events"} {
				r := g.Do(t, http.MethodGet, fmt.Sprintf(path, id), limited, nil, "")
				miss := g.Do(t, http.MethodGet, fmt.Sprintf(path, absent), limited, nil, "")
				requireProblem(t, g, r, http.StatusNotFound, "not-found")
				assert.JSONEq(t, string(miss.Body), string(r.Body))
			}
			r := g.Do(t, http.MethodGet, "/v1/operations?key=order-1042:refund", limited, nil, "")
			requireProblem(t, g, r, http.StatusNotFound, "not-found")
			assert.NotContains(t, string(r.Body), "R-5001")
			list := g.Do(t, http.MethodGet, "/v1/operations", limited, nil, "")
			require.Equal(t, http.StatusOK, list.Status)
			assert.NotContains(t, string(list.Body), id)
			for _, path := range []string{"/v1/operations/%s/cancel", "/v1/operations/%s/compensate"} {
				r := g.Do(t, http.MethodPost, fmt.Sprintf(path, id), limited, nil, "")
				requireProblem(t, g, r, http.StatusNotFound, "not-found")
			}
		})

		// No operation recorded, no downstream call, the refund untouched.
		assert.Equal(t, ops, g.Count(t))
		assert.Len(t, g.Sandbox.Requests(""), requests)
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"))
		assert.JSONEq(t, string(refund.Body), string(getOp(t, g, g.Key, id).Body))

		// What the key may use still works.
		ok := submitAs(t, g, limited, "limited:ticket", "tickets.create", ticketParams, nil)
		assert.Equal(t, "SUCCEEDED", requireOp(t, ok, http.StatusCreated)["state"])
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"))
	})
}
