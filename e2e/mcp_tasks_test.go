package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mcpRaw sends one JSON-RPC request to /mcp on protocol revision version and decodes the
// answer. On 2026-07-28 a tools/call carries the revision's own _meta and declares the Tasks
// extension, as a client that speaks it does.
func mcpRaw(t *testing.T, g *gatewaytest.Gateway, key, version, method, name, params string) map[string]any {
	t.Helper()
	h := map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": version, "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	r := g.Do(t, http.MethodPost, "/mcp", key, h, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), "%s", r.Body)
	return m
}

const tasksMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

func result(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	require.True(t, ok, "a result: %v", m)
	return r
}

// taskOf is the params of a 2026-07-28 tasks/* request about id, declaring the extension as
// every request of that revision must.
func taskOf(id string) string { return `{"taskId":"` + id + `",` + tasksMeta + `}` }

func rpcErrorCode(t *testing.T, m map[string]any) float64 {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	require.True(t, ok, "an error: %v", m)
	return e["code"].(float64)
}

// TestMCPTasksOn2026: a client that declares the Tasks extension gets a task for a call that
// would wait. The task is the operation: tasks/get says what it waits for, follows it through a
// reviewer's approval and answers, once completed, exactly the result a plain call answers;
// tasks/cancel cancels what was never sent and refuses the rest; an UNKNOWN refund is a working
// task until the reconciler settles it; another tenant's task is not found. Both engines.
func TestMCPTasksOn2026(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		const v = "2026-07-28"
		payout := func(key string) map[string]any {
			return result(t, mcpRaw(t, g, g.Key, v, "tools/call", "payments__payout", `{"name":"payments__payout",`+
				`"arguments":{"order_id":"o-7","amount_cents":250000,"currency":"EUR","operation_key":"`+key+`"},`+tasksMeta+`}`))
		}
		get := func(id string) map[string]any {
			return result(t, mcpRaw(t, g, g.Key, v, "tasks/get", id, taskOf(id)))
		}

		created := payout("payout-1")
		require.Equal(t, "task", created["resultType"], "a call that waits for a reviewer answers a task")
		id := created["taskId"].(string)
		assert.Equal(t, "working", created["status"])
		op, err := g.Ledger.Get(t.Context(), g.Tenant, id)
		require.NoError(t, err, "the task is the operation")
		assert.Equal(t, models.StateAwaitingApproval, op.State)

		got := get(id)
		assert.Equal(t, "complete", got["resultType"])
		assert.Equal(t, "working", got["status"])
		assert.Contains(t, got["statusMessage"], "reviewer's approval")
		assert.GreaterOrEqual(t, got["pollIntervalMs"], 500.0)
		assert.Contains(t, got, "ttlMs")

		undeclared := g.Do(t, http.MethodPost, "/mcp", g.Key, map[string]string{"Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": v, "Mcp-Method": "tasks/get", "Mcp-Name": id},
			`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"`+id+`","_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`)
		assert.Equal(t, http.StatusBadRequest, undeclared.Status, "tasks/* from a request that does not declare the extension")
		assert.Contains(t, string(undeclared.Body), `"code":-32021`)
		other := g.NewTenant(t, "globex", "agent", nil)
		assert.EqualValues(t, -32602, rpcErrorCode(t, mcpRaw(t, g, other, v, "tasks/get", id, taskOf(id))), "another tenant's task is not found")

		_, err = g.Ledger.Approve(t.Context(), models.Action{Scope: models.AllTenants(), Tenant: g.Tenant, OperationID: id,
			Actor: "user:rita@example.com", UserID: "rita", Reason: "invoice matches", ExpectedState: models.StateAwaitingApproval,
			ExpectedAttempts: op.Attempts}, 1, time.Hour)
		require.NoError(t, err)
		gatewaytest.Eventually(t, 15*time.Second, "the approved payout to complete", func() bool { return get(id)["status"] == "completed" })
		done := get(id)
		plain := result(t, mcpRaw(t, g, g.Key, v, "tools/call", "payments__payout", `{"name":"payments__payout",`+
			`"arguments":{"order_id":"o-7","amount_cents":250000,"currency":"EUR","operation_key":"payout-1"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`))
		// The revision's own members (resultType, the server's info in _meta) are the envelope of
		// a tools/call answer, not the call's result.
		delete(plain, "resultType")
		for k := range plain["_meta"].(map[string]any) {
			if strings.HasPrefix(k, "io.modelcontextprotocol/") {
				delete(plain["_meta"].(map[string]any), k)
			}
		}
		assert.Equal(t, plain, done["result"], "the task's result is what a plain call answers")
		assert.EqualValues(t, -32602, rpcErrorCode(t, mcpRaw(t, g, g.Key, v, "tasks/cancel", id, taskOf(id))), "a sent operation cannot be cancelled")

		waiting := payout("payout-2")["taskId"].(string)
		ack := result(t, mcpRaw(t, g, g.Key, v, "tasks/cancel", waiting, taskOf(waiting)))
		assert.Equal(t, map[string]any{"resultType": "complete"}, ack)
		assert.Equal(t, "cancelled", get(waiting)["status"])
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"), "one payout: the approved one")

		// A refund whose answer is lost: UNKNOWN, a working task until the reconciler finds it.
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Method: http.MethodPost, Path: "/refunds", Count: 1})
		refund := result(t, mcpRaw(t, g, g.Key, v, "tools/call", "refunds__issue", `{"name":"refunds__issue",`+
			`"arguments":{"order_id":"o-8","amount_cents":4200,"currency":"EUR","operation_key":"refund-1"},"_meta":{`+
			`"idemgate/wait":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
			`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`))
		require.Equal(t, "task", refund["resultType"], "%v", refund)
		rid := refund["taskId"].(string)
		unknown := get(rid)
		assert.Equal(t, "working", unknown["status"])
		assert.Contains(t, unknown["statusMessage"], "reconciling")
		settled := settle(t, g, rid)
		require.Equal(t, models.StateSucceeded, settled.State)
		assert.Equal(t, "completed", get(rid)["status"])
		assert.Equal(t, 2, g.Sandbox.Committed("refunds"), "one refund for the lost answer")

		// A call that ends at once is answered as usual, even to a client that speaks tasks.
		ticket := result(t, mcpRaw(t, g, g.Key, v, "tools/call", "tickets__create", `{"name":"tickets__create",`+
			`"arguments":{"subject":"Printer","operation_key":"ticket-1"},`+tasksMeta+`}`))
		assert.NotEqual(t, "task", ticket["resultType"])
		assert.Equal(t, false, ticket["isError"] == true)
	})
}

// TestMCPTasksOn2025: on 2025-11-25 a tools/call with params.task answers a task at once;
// tasks/get reads it and tasks/result answers the call's result once it is terminal, with the
// related task in _meta; tools/list says every tool may be called as a task; initialize
// declares the utility. Both engines.
func TestMCPTasksOn2025(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		const v = "2025-11-25"
		created := result(t, mcpRaw(t, g, g.Key, v, "tools/call", "", `{"name":"tickets.create","task":{"ttl":60000},`+
			`"arguments":{"subject":"Printer","operation_key":"t-1"}}`))
		task := created["task"].(map[string]any)
		id := task["taskId"].(string)
		assert.Contains(t, []any{"working", "completed"}, task["status"])
		assert.Contains(t, task, "pollInterval")
		assert.Contains(t, task, "ttl")

		res := result(t, mcpRaw(t, g, g.Key, v, "tasks/result", "", `{"taskId":"`+id+`"}`))
		assert.Equal(t, map[string]any{"taskId": id}, res["_meta"].(map[string]any)["io.modelcontextprotocol/related-task"])
		assert.Equal(t, "SUCCEEDED", res["structuredContent"].(map[string]any)["state"])
		assert.Equal(t, "completed", result(t, mcpRaw(t, g, g.Key, v, "tasks/get", "", `{"taskId":"`+id+`"}`))["status"])
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"))

		payout := result(t, mcpRaw(t, g, g.Key, v, "tools/call", "", `{"name":"payments.payout","task":{},`+
			`"arguments":{"order_id":"o-9","amount_cents":100,"currency":"EUR","operation_key":"p-1"}}`))["task"].(map[string]any)
		cancelled := result(t, mcpRaw(t, g, g.Key, v, "tasks/cancel", "", fmt.Sprintf(`{"taskId":%q}`, payout["taskId"])))
		assert.Equal(t, "cancelled", cancelled["status"])

		list := result(t, mcpRaw(t, g, g.Key, v, "tools/list", "", `{}`))
		for _, tl := range list["tools"].([]any) {
			assert.Equal(t, map[string]any{"taskSupport": "optional"}, tl.(map[string]any)["execution"])
		}
		init := result(t, mcpRaw(t, g, g.Key, v, "initialize", "", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}`))
		assert.Contains(t, init["capabilities"], "tasks")
	})
}

// TestMCPTaskOutlivesItsGateway: a task is the operation in the ledger, not a gateway's memory:
// another gateway on the same ledger (a replica, or the same one restarted) finds it, follows it
// and answers its result. Both engines.
func TestMCPTaskOutlivesItsGateway(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		db := testdb.Open(t, d)
		const v = "2026-07-28"
		// The first gateway runs in a subtest of its own, so that the harness stops it (its
		// t.Cleanup: listeners closed, Run's context cancelled, Shutdown) when the subtest
		// ends, before the second one starts: a restart, not a replica.
		var first *gatewaytest.Gateway
		var id string
		var before map[string]any
		t.Run("first gateway", func(t *testing.T) {
			first = gatewaytest.StartWith(t, d, gatewaytest.Options{DB: db})
			created := result(t, mcpRaw(t, first, first.Key, v, "tools/call", "payments__payout", `{"name":"payments__payout",`+
				`"arguments":{"order_id":"o-1","amount_cents":900,"currency":"EUR","operation_key":"outlives-1"},`+tasksMeta+`}`))
			id = created["taskId"].(string)
			before = result(t, mcpRaw(t, first, first.Key, v, "tasks/get", id, taskOf(id)))
			assert.Equal(t, "working", before["status"])
		})
		require.NotEmpty(t, id, "the first gateway made a task")
		_, err := (&http.Client{Timeout: 2 * time.Second}).Get(first.URL + "/mcp")
		require.Error(t, err, "the first gateway is stopped")

		second := gatewaytest.StartWith(t, d, gatewaytest.Options{DB: db})
		got := result(t, mcpRaw(t, second, second.Key, v, "tasks/get", id, taskOf(id)))
		assert.Equal(t, "working", got["status"])
		assert.Equal(t, id, got["taskId"])
		assert.Equal(t, before, got, "the restarted gateway answers tasks/get as the first did")
		_, err = second.Ledger.Approve(t.Context(), models.Action{Scope: models.AllTenants(), Tenant: second.Tenant, OperationID: id,
			Actor: "user:rita@example.com", UserID: "rita", Reason: "ok", ExpectedState: models.StateAwaitingApproval}, 1, time.Hour)
		require.NoError(t, err)
		gatewaytest.Eventually(t, 15*time.Second, "the payout to complete", func() bool {
			return result(t, mcpRaw(t, second, second.Key, v, "tasks/get", id, taskOf(id)))["status"] == "completed"
		})
		done := result(t, mcpRaw(t, second, second.Key, v, "tasks/get", id, taskOf(id)))
		assert.Equal(t, "SUCCEEDED", done["result"].(map[string]any)["structuredContent"].(map[string]any)["state"])
		assert.Equal(t, 1, first.Sandbox.Committed("refunds")+second.Sandbox.Committed("refunds"), "one payout")
	})
}
