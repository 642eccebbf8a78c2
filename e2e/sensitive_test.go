package e2e_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSensitiveParamsMasked: a card number reaches the downstream as given and appears in no
// answer of the API, in any representation.
func TestSensitiveParamsMasked(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		params := `{"order_id":"o-55","amount_cents":1999,"currency":"EUR","card_number":"` + card + `"}`
		noLeak := func(t *testing.T, what string, r gatewaytest.Response) {
			t.Helper()
			assert.NotContains(t, string(r.Body), card, "%s leaks the card number", what)
			assert.NotContains(t, string(r.Body), "42424242", "%s leaks part of the card number", what)
		}
		masked := func(t *testing.T, op map[string]any) {
			t.Helper()
			b, _ := json.Marshal(op["params"])
			assert.JSONEq(t, `{"order_id":"o-55","amount_cents":1999,"currency":"EUR","card_number":"***"}`, string(b))
		}

		first := g.Submit(t, "card-refund", "refunds.issue", params, nil)
		noLeak(t, "POST", first)
		op := requireOp(t, first, http.StatusCreated)
		masked(t, op)
		id := op["id"].(string)

		// The downstream got the number as given.
		reqs := g.Sandbox.Requests("/refunds")
		require.Len(t, reqs, 1)
		assert.Contains(t, string(reqs[0].Body), card)

		replay := g.Submit(t, "card-refund", "refunds.issue", params, nil)
		noLeak(t, "replay", replay)
		masked(t, requireReplay(t, replay, first))

		byID := getOp(t, g, g.Key, id)
		noLeak(t, "GET by id", byID)
		masked(t, requireOp(t, byID, http.StatusOK))
		noLeak(t, "GET by key", g.Do(t, http.MethodGet, "/v1/operations?key=card-refund", g.Key, nil, ""))
		noLeak(t, "list", g.Do(t, http.MethodGet, "/v1/operations", g.Key, nil, ""))
		noLeak(t, "list by tool", g.Do(t, http.MethodGet, "/v1/operations?tool=refunds.issue&limit=1", g.Key, nil, ""))
		noLeak(t, "events", g.Do(t, http.MethodGet, "/v1/operations/"+id+"/events", g.Key, nil, ""))

		// Problems about the operation do not quote it either.
		mismatch := g.Submit(t, "card-refund", "refunds.issue",
			`{"order_id":"o-55","amount_cents":2000,"currency":"EUR","card_number":"`+card+`"}`, nil)
		noLeak(t, "mismatch", mismatch)
		requireProblem(t, g, mismatch, http.StatusUnprocessableEntity, "idempotency-key-mismatch")
		invalid := g.Submit(t, "card-invalid", "refunds.issue", `{"order_id":"o","amount_cents":0,"currency":"EUR","card_number":"`+card+`"}`, nil)
		noLeak(t, "invalid params", invalid)
		requireProblem(t, g, invalid, http.StatusBadRequest, "invalid-params")
		wrongType := g.Submit(t, "card-invalid", "refunds.issue", `{"order_id":"o","amount_cents":1,"currency":"EUR","card_number":`+card+`}`, nil)
		noLeak(t, "invalid sensitive param", wrongType)
		requireProblem(t, g, wrongType, http.StatusBadRequest, "invalid-params")
		noLeak(t, "not-compensable", g.Do(t, http.MethodPost, "/v1/operations/"+id+"/compensate", g.Key, nil, ""))
		noLeak(t, "not-cancellable", g.Do(t, http.MethodPost, "/v1/operations/"+id+"/cancel", g.Key, nil, ""))

		// An operation not yet terminal, answered 202 and 409.
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/refunds", Count: 1})
		params2 := `{"order_id":"o-56","amount_cents":5,"currency":"EUR","card_number":"` + card + `"}`
		unknown := g.Submit(t, "card-unknown", "refunds.issue", params2, map[string]string{"Prefer": "wait=0"})
		noLeak(t, "202", unknown)
		masked2 := requireOp(t, unknown, http.StatusAccepted)
		b, _ := json.Marshal(masked2["params"])
		assert.JSONEq(t, `{"order_id":"o-56","amount_cents":5,"currency":"EUR","card_number":"***"}`, string(b))
		waitState(t, g, masked2["id"].(string), "UNKNOWN", 3*time.Second)
		dup := g.Submit(t, "card-unknown", "refunds.issue", params2, map[string]string{"Prefer": "wait=0"})
		noLeak(t, "409", dup)
		requireProblem(t, g, dup, http.StatusConflict, "operation-uncertain")
		assert.Equal(t, 2, g.Sandbox.Committed("refunds"))
	})
}
