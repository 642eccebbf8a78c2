package e2e_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReservedCompensationKeys: keys beginning with compensate: are the gateway's own. An
// agent's POST /v1/operations, MCP call or compensate request under one is refused with 422
// idempotency-key-reserved and runs nothing; the gateway's own compensation path still uses
// the key and works afterwards.
func TestReservedCompensationKeys(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		ticket := requireOp(t, g.Submit(t, "rk-ticket", "tickets.create", `{"subject":"to undo"}`, nil), http.StatusCreated)
		id := ticket["id"].(string)
		other := requireOp(t, g.Submit(t, "rk-other", "tickets.create", `{"subject":"another"}`, nil), http.StatusCreated)
		ops, requests := g.Count(t), len(g.Sandbox.Requests(""))
		closeParams := `{"ticket_id":"T-1001","reason":"compensation for ` + id + `"}`

		for name, key := range map[string]string{
			"the original's compensation key":  "compensate:" + id,
			"as an RFC 8941 string":            `"compensate:` + id + `"`,
			"any key with the prefix":          "compensate:my-own-undo",
			"the prefix alone":                 "compensate:",
			"another operation's compensation": "compensate:" + other["id"].(string),
		} {
			t.Run("POST /v1/operations: "+name, func(t *testing.T) {
				r := g.Submit(t, key, "tickets.close", closeParams, nil)
				p := requireProblem(t, g, r, http.StatusUnprocessableEntity, "idempotency-key-reserved")
				assert.NotContains(t, p, "operation_id")
			})
		}
		t.Run("MCP tools/call", func(t *testing.T) {
			s := mcpSession(t, g, g.Key)
			for _, call := range []struct{ meta, arg string }{{"compensate:" + id, ""}, {"", "compensate:" + id}} {
				args := map[string]any{"ticket_id": "T-1001", "reason": "compensation for " + id}
				if call.arg != "" {
					args["operation_key"] = call.arg
				}
				res := callTool(t, s, "tickets.close", call.meta, args)
				require.True(t, res.IsError, resultText(res))
				assert.Equal(t, "idempotency-key-reserved", res.Meta["idemgate/problem"])
				p := structured(t, res)
				assert.Equal(t, "/problems/idempotency-key-reserved", p["type"])
				assert.EqualValues(t, http.StatusUnprocessableEntity, p["status"])
			}
		})
		t.Run("compensate under another operation's compensation key", func(t *testing.T) {
			r := compensate(t, g, id, map[string]string{"Idempotency-Key": "compensate:" + other["id"].(string)})
			requireProblem(t, g, r, http.StatusUnprocessableEntity, "idempotency-key-reserved")
		})

		// Nothing was recorded and nothing reached the downstream.
		assert.Equal(t, ops, g.Count(t))
		assert.Len(t, g.Sandbox.Requests(""), requests)
		assert.Equal(t, 0, g.Sandbox.Committed("closes"))
		assert.Nil(t, requireOp(t, getOp(t, g, g.Key, id), http.StatusOK)["compensated_by"])

		t.Run("the gateway's own compensation path keeps the key", func(t *testing.T) {
			comp := requireOp(t, compensate(t, g, id, nil), http.StatusCreated)
			assert.Equal(t, "compensate:"+id, comp["key"])
			assert.Equal(t, id, comp["compensates"])
			assert.Equal(t, 1, g.Sandbox.Committed("closes"))
			again := compensate(t, g, id, map[string]string{"Idempotency-Key": "compensate:" + id})
			assert.Equal(t, comp["id"], requireOp(t, again, http.StatusOK)["id"], "the default, spelled out, replays it")
			assert.Equal(t, 1, g.Sandbox.Committed("closes"))
		})
	})
}

// TestKeyMismatchOnAForeignToolRevealsNothing: a key taken by an operation of a tool the
// caller may not use answers 422 idempotency-key-mismatch saying only that the key is taken:
// no operation id, state or tool, over the API and MCP alike. With a tool the caller may use,
// the problem names the operation as usual.
func TestKeyMismatchOnAForeignToolRevealsNothing(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		refund := requireOp(t, g.Submit(t, "shared-key", "refunds.issue", refundParams, nil), http.StatusCreated)
		refundID := refund["id"].(string)
		ticketBot := g.NewTenant(t, "acme", "ticket-bot", []string{"tickets.create"})
		ops, requests := g.Count(t), len(g.Sandbox.Requests(""))
		revealsNothing := func(t *testing.T, p map[string]any, text string) {
			t.Helper()
			for _, member := range []string{"operation_id", "state", "safe_to_retry_with_new_key"} {
				assert.NotContains(t, p, member)
			}
			for _, secret := range []string{refundID, "refunds", "SUCCEEDED"} {
				assert.NotContains(t, text, secret)
			}
		}

		t.Run("API", func(t *testing.T) {
			r := submitAs(t, g, ticketBot, "shared-key", "tickets.create", ticketParams, nil)
			p := requireProblem(t, g, r, http.StatusUnprocessableEntity, "idempotency-key-mismatch")
			revealsNothing(t, p, string(r.Body))
		})
		t.Run("MCP", func(t *testing.T) {
			res := callTool(t, mcpSession(t, g, ticketBot), "tickets.create", "shared-key", map[string]any{"subject": "x"})
			require.True(t, res.IsError)
			assert.Equal(t, "idempotency-key-mismatch", res.Meta["idemgate/problem"])
			p := structured(t, res)
			revealsNothing(t, p, resultText(res))
		})
		t.Run("a tool the caller may use names the operation", func(t *testing.T) {
			r := g.Submit(t, "shared-key", "tickets.create", ticketParams, nil)
			p := requireProblem(t, g, r, http.StatusUnprocessableEntity, "idempotency-key-mismatch")
			requireOperationProblem(t, p, refundID, "SUCCEEDED")
		})
		t.Run("the audit log still says which operation", func(t *testing.T) {
			entries, _, err := g.Ledger.AuditEntries(t.Context(), models.AllTenants(),
				models.AuditSearch{Action: "api.key_mismatch", Actor: "api:ticket-bot", Limit: 10})
			require.NoError(t, err)
			require.Len(t, entries, 1, "the API's refusal")
			for _, e := range entries {
				assert.Equal(t, refundID, e.OperationID)
			}
		})
		assert.Equal(t, ops, g.Count(t))
		assert.Len(t, g.Sandbox.Requests(""), requests, "nothing ran")
	})
}

// TestReadToolKeyAsDocumented (issue 50 item 14): docs/TOOLS.md says what the gateway does with
// a read tool's key, and it does that: POST /v1/operations requires the Idempotency-Key for a
// read as for every tool (400 idempotency-key-missing, nothing runs), while /mcp runs a read
// called without a key. TOOLS.md said a read needs no key. Both engines.
func TestReadToolKeyAsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/TOOLS.md")
	require.NoError(t, err)
	var row string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `effect` |") {
			row = line
		}
	}
	require.NotEmpty(t, row, "TOOLS.md has no effect row")
	assert.NotContains(t, row, "no key needed")
	assert.Contains(t, row, "an `Idempotency-Key` on the JSON API")
	assert.Contains(t, row, "`/mcp` also takes a read without a key")

	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: withReadTool})
		created := requireOp(t, g.Submit(t, "read-doc:ticket", "tickets.create", `{"subject":"s"}`, nil), http.StatusCreated)
		ticketID := created["result"].(map[string]any)["id"].(string)
		before := g.Count(t)
		r := g.Do(t, http.MethodPost, "/v1/operations", g.Key, nil, `{"tool":"tickets.get","params":{"ticket_id":"`+ticketID+`"}}`)
		requireProblem(t, g, r, http.StatusBadRequest, "idempotency-key-missing")
		assert.Equal(t, before, g.Count(t), "nothing recorded")

		requireOp(t, g.Submit(t, "read-doc:get", "tickets.get", `{"ticket_id":"`+ticketID+`"}`, nil), http.StatusCreated)

		res := callTool(t, mcpSession(t, g, g.Key), "tickets.get", "", map[string]any{"ticket_id": ticketID})
		require.False(t, res.IsError, resultText(res))
		assert.Equal(t, "SUCCEEDED", structured(t, res)["state"])
	})
}
