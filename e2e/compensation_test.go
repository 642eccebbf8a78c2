package e2e_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func compensate(t testing.TB, g *gatewaytest.Gateway, id string, header map[string]string) gatewaytest.Response {
	t.Helper()
	return g.Do(t, http.MethodPost, "/v1/operations/"+id+"/compensate", g.Key, header, "")
}

// TestCompensation: undoing a SUCCEEDED ticket is a new, linked tickets.close operation that
// runs once, however often it is asked for.
func TestCompensation(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		created := g.Do(t, http.MethodPost, "/v1/operations", g.Key, map[string]string{"Idempotency-Key": "wf-c:ticket"},
			`{"tool":"tickets.create","params":{"subject":"to undo"},"workflow_run_id":"wf-c","step_id":"ticket"}`)
		original := requireOp(t, created, http.StatusCreated)
		id := original["id"].(string)
		require.Equal(t, "SUCCEEDED", original["state"])

		first := compensate(t, g, id, nil)
		comp := requireOp(t, first, http.StatusCreated)
		compID := comp["id"].(string)
		assert.NotEqual(t, id, compID)
		assert.Equal(t, "tickets.close", comp["tool"])
		assert.Equal(t, "SUCCEEDED", comp["state"])
		assert.Equal(t, "compensate:"+id, comp["key"])
		assert.Equal(t, id, comp["compensates"])
		assert.Nil(t, comp["compensated_by"])
		assert.Equal(t, "wf-c", comp["workflow_run_id"])
		params, _ := json.Marshal(comp["params"])
		assert.JSONEq(t, `{"ticket_id":"T-1001","reason":"compensation for `+id+`"}`, string(params))
		result, _ := comp["result"].(map[string]any)
		assert.Equal(t, "closed", result["status"])

		after := requireOp(t, getOp(t, g, g.Key, id), http.StatusOK)
		assert.Equal(t, compID, after["compensated_by"])
		assert.Equal(t, "SUCCEEDED", after["state"], "a compensation never rewrites the original")
		assert.Nil(t, after["compensates"])

		// The business outcome: the ticket is closed, once, by the compensation operation.
		assert.Equal(t, 1, g.Sandbox.Committed("closes"))
		closes := g.Sandbox.Requests("/tickets/T-1001/close")
		require.Len(t, closes, 1)
		assert.Equal(t, compID, closes[0].Header.Get("X-Idemgate-Operation"))

		t.Run("asked again", func(t *testing.T) {
			requireReplay(t, compensate(t, g, id, nil), first)
			requireReplay(t, compensate(t, g, id, map[string]string{"Idempotency-Key": "compensate:" + id}), first)
			assert.Equal(t, 1, g.Sandbox.Committed("closes"))
			assert.Len(t, g.Sandbox.Requests("/tickets/T-1001/close"), 1)
		})
		t.Run("asked again under another key", func(t *testing.T) {
			ops := g.Count(t)
			r := compensate(t, g, id, map[string]string{"Idempotency-Key": "undo-ticket-again"})
			t.Logf("second compensation under another key: %d %s", r.Status, r.Body)
			assert.Contains(t, []int{http.StatusOK, http.StatusConflict}, r.Status, "body: %s", r.Body)
			if r.Status == http.StatusOK {
				assert.Equal(t, compID, r.JSON(t)["id"])
			} else {
				// Either way the answer concerns an existing operation, so it says which.
				p := requireProblem(t, g, r, http.StatusConflict, "not-compensable")
				requireOperationProblem(t, p, id, "SUCCEEDED")
			}
			assert.Equal(t, ops, g.Count(t), "an operation has at most one compensation")
			assert.Equal(t, 1, g.Sandbox.Committed("closes"))
			assert.Equal(t, compID, requireOp(t, getOp(t, g, g.Key, id), http.StatusOK)["compensated_by"])
		})
		t.Run("timeline", func(t *testing.T) {
			evs := events(t, g, g.Key, id)
			requireEventShapes(t, evs)
			last := evs[len(evs)-1]
			assert.Equal(t, "compensation_linked", last["type"])
			assert.Equal(t, compID, last["detail"].(map[string]any)["compensated_by"])
			assert.Equal(t, "api:agent", last["actor"])
			assert.Contains(t, eventTypes(events(t, g, g.Key, compID)), "compensation_linked")
		})
	})
}

// TestNotCompensable: a tool without compensation, or an operation that did not succeed, is
// 409 not-compensable and nothing runs.
func TestNotCompensable(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		refund := requireOp(t, g.Submit(t, "nc-refund", "refunds.issue", refundParams, nil), http.StatusCreated)
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeReject, Path: "/tickets", Count: 1})
		failed := requireOp(t, g.Submit(t, "nc-failed", "tickets.create", ticketParams, nil), http.StatusCreated)
		require.Equal(t, "FAILED_FINAL", failed["state"])
		awaiting := requireOp(t, g.Submit(t, "nc-payout", "payments.payout", payoutParams, nil), http.StatusAccepted)
		ticket := requireOp(t, g.Submit(t, "nc-ticket", "tickets.create", ticketParams, nil), http.StatusCreated)
		comp := requireOp(t, compensate(t, g, ticket["id"].(string), nil), http.StatusCreated)
		ops, requests := g.Count(t), len(g.Sandbox.Requests(""))

		for name, c := range map[string]struct {
			op    map[string]any
			state string
		}{
			"tool without compensation":          {refund, "SUCCEEDED"},
			"failed operation":                   {failed, "FAILED_FINAL"},
			"operation awaiting approval":        {awaiting, "AWAITING_APPROVAL"},
			"a compensation has no compensation": {comp, "SUCCEEDED"},
		} {
			t.Run(name, func(t *testing.T) {
				id := c.op["id"].(string)
				p := requireProblem(t, g, compensate(t, g, id, nil), http.StatusConflict, "not-compensable")
				requireOperationProblem(t, p, id, c.state)
				assert.Nil(t, requireOp(t, getOp(t, g, g.Key, id), http.StatusOK)["compensated_by"])
			})
		}
		requireProblem(t, g, compensate(t, g, models.NewOperationID(), nil), http.StatusNotFound, "not-found")

		assert.Equal(t, ops, g.Count(t))
		assert.Len(t, g.Sandbox.Requests(""), requests)
		assert.Equal(t, 1, g.Sandbox.Committed("closes"))
	})
}
