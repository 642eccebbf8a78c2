package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/idemgate/idemgate/static"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// conformanceExempt are documented answers the conformance test cannot cause, with why.
var conformanceExempt = map[string]string{
	"POST /v1/operations/{id}/compensate 409 operation-awaiting-approval": "the test catalogue's compensation tool needs no approval",
}

// TestOpenAPIConformance drives every answer docs/openapi.json documents, on real gateways,
// and validates each request and answer against the document the gateway serves; it then
// requires that no documented answer was left unmet.
func TestOpenAPIConformance(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		c := newConformance(t)
		// Tickets are held for slow in places: they must be slow, not timed out.
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: slowTicketTools(t)})
		limited := g.NewTenant(t, "acme", "ticket-bot", []string{"tickets.create"})

		conformService(t, c, g)
		conformTools(t, c, g)
		ops := conformSubmit(t, c, g, limited)
		conformReads(t, c, g, ops)
		conformCancel(t, c, g, ops)
		conformCompensate(t, c, g, limited, ops)
		conformMCP(t, c, g)

		throttled := gatewaytest.StartWith(t, d, gatewaytest.Options{RateLimit: 0.001, RateBurst: 1})
		conformRateLimit(t, c, throttled)
		// A gateway of its own: the throttled one's key is remembered, so its requests would
		// meet the rate limit before the ledger.
		conformUnavailable(t, c, gatewaytest.Start(t, d))
		conformConnectionNotConfigured(t, c, d)
		conformPolicy(t, c, gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: policyTools}))

		assert.Empty(t, c.unmet(conformanceExempt), "documented answers no request met")
	})
}

// conformOps are the operations the phases share.
type conformOps struct {
	created, async, payout, refund string
}

func submitReq(apiKey, key, body, prefer string) req {
	h := http.Header{}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	if prefer != "" {
		h.Set("Prefer", prefer)
	}
	return req{method: http.MethodPost, path: "/v1/operations", apiKey: apiKey, header: h, body: body}
}

func toolBody(tool, params string) string { return `{"tool":"` + tool + `","params":` + params + `}` }

func conformService(t *testing.T, c *conformance, g *gatewaytest.Gateway) {
	html := http.Header{"Accept": {"text/html"}}
	for _, path := range []string{"/healthz", "/readyz"} {
		assert.Equal(t, http.StatusOK, c.send(t, g, req{method: http.MethodGet, path: path}).Status, path)
	}
	doc := c.send(t, g, req{method: http.MethodGet, path: "/openapi.json"})
	require.Equal(t, http.StatusOK, doc.Status)
	assert.Equal(t, static.OpenAPI(), doc.Body, "GET /openapi.json serves docs/openapi.json")
	assert.Equal(t, http.StatusOK, c.send(t, g, req{method: http.MethodGet, path: "/problems", header: html}).Status)
	assert.Equal(t, http.StatusOK, c.send(t, g, req{method: http.MethodGet, path: "/problems/not-found", header: html}).Status)
	assert.Equal(t, http.StatusNotFound, c.send(t, g, req{method: http.MethodGet, path: "/problems/nope", header: html}).Status)
	requireProblem(t, g, c.send(t, g, req{method: http.MethodGet, path: "/problems/nope"}), http.StatusNotFound, "not-found")
}

func conformTools(t *testing.T, c *conformance, g *gatewaytest.Gateway) {
	for _, q := range []string{"", "?format=default", "?format=openai", "?format=anthropic", "?format=mcp",
		"?format=openai&strict=true", "?format=openai&api=responses", "?format=openai&api=responses&strict=true",
		"?format=openai&api=chat_completions&strict=false"} {
		r := c.send(t, g, req{method: http.MethodGet, path: "/v1/tools" + q, apiKey: g.Key})
		assert.Equal(t, http.StatusOK, r.Status, "format %q", q)
	}
	r := c.send(t, g, req{method: http.MethodGet, path: "/v1/tools?format=xml", apiKey: g.Key, outside: true})
	requireProblem(t, g, r, http.StatusBadRequest, "unsupported-format")
	r = c.send(t, g, req{method: http.MethodGet, path: "/v1/tools?format=openai&api=assistants", apiKey: g.Key, outside: true})
	requireProblem(t, g, r, http.StatusBadRequest, "invalid-query")
	r = c.send(t, g, req{method: http.MethodGet, path: "/v1/tools", outside: true})
	requireProblem(t, g, r, http.StatusUnauthorized, "unauthenticated")
}

func conformSubmit(t *testing.T, c *conformance, g *gatewaytest.Gateway, limited string) conformOps {
	var ops conformOps
	ticket := `{"tool":"tickets.create","params":{"subject":"Printer on fire"},"workflow_run_id":"wf-oas","step_id":"create-ticket"}`

	first := c.send(t, g, submitReq(g.Key, "oas-create", ticket, "wait=10"))
	ops.created = requireOp(t, first, http.StatusCreated)["id"].(string)
	assert.Equal(t, "wait=10", first.Header.Get("Preference-Applied"))
	requireReplay(t, c.send(t, g, submitReq(g.Key, "oas-create", ticket, "")), first)

	g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/tickets", Count: 1, Delay: slow})
	async := c.send(t, g, submitReq(g.Key, "oas-async", toolBody("tickets.create", ticketParams), "respond-async"))
	ops.async = requireOp(t, async, http.StatusAccepted)["id"].(string)
	dup := c.send(t, g, submitReq(g.Key, "oas-async", toolBody("tickets.create", ticketParams), "wait=0"))
	requireOperationProblem(t, requireProblem(t, g, dup, http.StatusConflict, "operation-in-progress"), ops.async, "RUNNING")
	waitState(t, g, ops.async, "SUCCEEDED", 5*time.Second)

	g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/emails", Count: 1})
	email := toolBody("email.send", `{"to":"a@example.com","subject":"hi","body":"hello"}`)
	unknown := requireOp(t, c.send(t, g, submitReq(g.Key, "oas-unknown", email, "")), http.StatusAccepted)
	r := c.send(t, g, submitReq(g.Key, "oas-unknown", email, ""))
	requireOperationProblem(t, requireProblem(t, g, r, http.StatusConflict, "operation-uncertain"), unknown["id"].(string), "UNKNOWN")

	payout := toolBody("payments.payout", payoutParams)
	ops.payout = requireOp(t, c.send(t, g, submitReq(g.Key, "oas-payout", payout, "")), http.StatusAccepted)["id"].(string)
	r = c.send(t, g, submitReq(g.Key, "oas-payout", payout, ""))
	requireOperationProblem(t, requireProblem(t, g, r, http.StatusConflict, "operation-awaiting-approval"), ops.payout, "AWAITING_APPROVAL")

	r = c.send(t, g, submitReq(g.Key, "oas-create", toolBody("tickets.create", `{"subject":"Printer fine"}`), ""))
	requireOperationProblem(t, requireProblem(t, g, r, http.StatusUnprocessableEntity, "idempotency-key-mismatch"), ops.created, "SUCCEEDED")
	r = c.send(t, g, submitReq(g.Key, "compensate:"+ops.created, toolBody("tickets.create", ticketParams), ""))
	requireProblem(t, g, r, http.StatusUnprocessableEntity, "idempotency-key-reserved")

	ops.refund = requireOp(t, c.send(t, g, submitReq(g.Key, "oas-refund", toolBody("refunds.issue", refundParams), "")), http.StatusCreated)["id"].(string)

	// A record past its retention: the ledger's own purge makes the tombstone.
	expired := requireOp(t, c.send(t, g, submitReq(g.Key, "oas-expire", email, "")), http.StatusCreated)
	n, err := g.Ledger.Purge(context.Background(), []string{"email.send"}, time.Now().Add(time.Minute), 100)
	require.NoError(t, err)
	require.Positive(t, n)
	r = c.send(t, g, submitReq(g.Key, "oas-expire", email, ""))
	requireOperationProblem(t, requireProblem(t, g, r, http.StatusGone, "idempotency-key-expired"), expired["id"].(string), "SUCCEEDED")

	bad := []struct {
		r      req
		status int
		slug   string
	}{
		{req{method: http.MethodPost, path: "/v1/operations", apiKey: g.Key, body: ticket, outside: true}, 400, "idempotency-key-missing"},
		{submitReq(g.Key, `""`, ticket, ""), 400, "idempotency-key-invalid"},
		{req{method: http.MethodPost, path: "/v1/operations", apiKey: g.Key, header: http.Header{"Idempotency-Key": {"oas-bad"}},
			body: `{"tool":`, outside: true}, 400, "malformed-body"},
		{submitReq(g.Key, "oas-bad", toolBody("tickets.create", `{"subject":42}`), ""), 400, "invalid-params"},
		{submitReq("", "oas-bad", ticket, ""), 401, "unauthenticated"},
		{submitReq(limited, "oas-bad", toolBody("refunds.issue", refundParams), ""), 403, "tool-forbidden"},
		{submitReq(g.Key, "oas-bad", toolBody("tickets.delete", ticketParams), ""), 404, "unknown-tool"},
		{submitReq(g.Key, "oas-bad", toolBody("tickets.create", `{"subject":"`+strings.Repeat("x", 1<<20)+`"}`), ""), 413, "body-too-large"},
		{req{method: http.MethodPost, path: "/v1/operations", apiKey: g.Key,
			header: http.Header{"Idempotency-Key": {"oas-bad"}, "Content-Type": {"text/plain"}}, body: ticket, outside: true}, 415, "unsupported-media-type"},
	}
	for _, b := range bad {
		requireProblem(t, g, c.send(t, g, b.r), b.status, b.slug)
	}
	return ops
}

func conformReads(t *testing.T, c *conformance, g *gatewaytest.Gateway, ops conformOps) {
	get := func(path string, outside bool) gatewaytest.Response {
		return c.send(t, g, req{method: http.MethodGet, path: path, apiKey: g.Key, outside: outside})
	}
	requireOp(t, get("/v1/operations/"+ops.created, false), http.StatusOK)
	requireProblem(t, g, get("/v1/operations/op_01JD7X4T6V8Q0W9M3K5N2P1R8S", false), http.StatusNotFound, "not-found")
	byKey := requireOp(t, get("/v1/operation-keys/oas-create", false), http.StatusOK)
	requireProblem(t, g, get("/v1/operation-keys/nobody-used-this", false), http.StatusNotFound, "not-found")
	// ?key= answers the same, and the document describes it (issue 50 item 8).
	assert.Equal(t, byKey, requireOp(t, get("/v1/operations?key=oas-create", false), http.StatusOK))
	requireProblem(t, g, get("/v1/operations?key=nobody-used-this", false), http.StatusNotFound, "not-found")
	assert.Equal(t, http.StatusOK, get("/v1/operations?workflow_run_id=wf-oas", false).Status)
	page := get("/v1/operations?limit=1&state=SUCCEEDED", false)
	require.Equal(t, http.StatusOK, page.Status)
	cursor, _ := page.JSON(t)["next_cursor"].(string)
	require.NotEmpty(t, cursor)
	assert.Equal(t, http.StatusOK, get("/v1/operations?limit=1&cursor="+cursor, false).Status)
	requireProblem(t, g, get("/v1/operations?limit=0", true), http.StatusBadRequest, "invalid-query")
	requireProblem(t, g, get("/v1/operations?state=DONE", true), http.StatusBadRequest, "invalid-query")
	requireProblem(t, g, get("/v1/operations?cursor=!", false), http.StatusBadRequest, "invalid-query")
	assert.NotEmpty(t, events(t, g, g.Key, ops.created))
	assert.Equal(t, http.StatusOK, get("/v1/operations/"+ops.created+"/events", false).Status)
	requireProblem(t, g, get("/v1/operations/op_01JD7X4T6V8Q0W9M3K5N2P1R8S/events", false), http.StatusNotFound, "not-found")
	for _, path := range []string{"/v1/operations", "/v1/operations/" + ops.created, "/v1/operations/" + ops.created + "/events",
		"/v1/operation-keys/oas-create"} {
		r := c.send(t, g, req{method: http.MethodGet, path: path, outside: true})
		requireProblem(t, g, r, http.StatusUnauthorized, "unauthenticated")
	}
}

func conformCancel(t *testing.T, c *conformance, g *gatewaytest.Gateway, ops conformOps) {
	cancel := func(id, apiKey string) gatewaytest.Response {
		return c.send(t, g, req{method: http.MethodPost, path: "/v1/operations/" + id + "/cancel", apiKey: apiKey, outside: apiKey == ""})
	}
	assert.Equal(t, "FAILED_FINAL", requireOp(t, cancel(ops.payout, g.Key), http.StatusOK)["state"])
	requireOperationProblem(t, requireProblem(t, g, cancel(ops.payout, g.Key), http.StatusConflict, "not-cancellable"), ops.payout, "FAILED_FINAL")
	requireProblem(t, g, cancel("op_01JD7X4T6V8Q0W9M3K5N2P1R8S", g.Key), http.StatusNotFound, "not-found")
	requireProblem(t, g, cancel(ops.payout, ""), http.StatusUnauthorized, "unauthenticated")
}

func conformCompensate(t *testing.T, c *conformance, g *gatewaytest.Gateway, limited string, ops conformOps) {
	compensate := func(id, apiKey string, h http.Header, outside bool) gatewaytest.Response {
		return c.send(t, g, req{method: http.MethodPost, path: "/v1/operations/" + id + "/compensate", apiKey: apiKey, header: h, outside: outside})
	}
	wait := http.Header{"Prefer": {"wait=10"}}
	first := compensate(ops.created, g.Key, wait, false)
	requireOp(t, first, http.StatusCreated)
	requireReplay(t, compensate(ops.created, g.Key, nil, false), first)

	r := compensate(ops.created, g.Key, http.Header{"Idempotency-Key": {"oas-create"}}, false)
	requireOperationProblem(t, requireProblem(t, g, r, http.StatusUnprocessableEntity, "idempotency-key-mismatch"), ops.created, "SUCCEEDED")
	requireProblem(t, g, compensate(ops.created, g.Key, http.Header{"Idempotency-Key": {`""`}}, true), http.StatusBadRequest, "idempotency-key-invalid")
	requireProblem(t, g, compensate(ops.created, g.Key, http.Header{"Idempotency-Key": {"compensate:" + ops.refund}}, false),
		http.StatusUnprocessableEntity, "idempotency-key-reserved")
	requireProblem(t, g, compensate(ops.created, g.Key, http.Header{"Idempotency-Key": {""}}, true), http.StatusBadRequest, "idempotency-key-missing")
	requireProblem(t, g, compensate(ops.created, limited, nil, false), http.StatusForbidden, "tool-forbidden")
	requireProblem(t, g, compensate("op_01JD7X4T6V8Q0W9M3K5N2P1R8S", g.Key, nil, false), http.StatusNotFound, "not-found")
	requireProblem(t, g, compensate(ops.created, "", nil, true), http.StatusUnauthorized, "unauthenticated")
	r = compensate(ops.refund, g.Key, nil, false)
	requireOperationProblem(t, requireProblem(t, g, r, http.StatusConflict, "not-compensable"), ops.refund, "SUCCEEDED")

	// A compensation still running, then one whose outcome is uncertain.
	g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/tickets", Count: 1, Delay: slow})
	requireOp(t, compensate(ops.async, g.Key, http.Header{"Prefer": {"respond-async"}}, false), http.StatusAccepted)
	r = compensate(ops.async, g.Key, http.Header{"Prefer": {"wait=0"}}, false)
	requireProblem(t, g, r, http.StatusConflict, "operation-in-progress")

	other := requireOp(t, c.send(t, g, submitReq(g.Key, "oas-uncertain", toolBody("tickets.create", ticketParams), "")), http.StatusCreated)
	g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeErrorAfterCommit, Path: "/tickets", Method: http.MethodPost, Count: 3})
	assert.Equal(t, "UNKNOWN", requireOp(t, compensate(other["id"].(string), g.Key, wait, false), http.StatusAccepted)["state"])
	requireProblem(t, g, compensate(other["id"].(string), g.Key, nil, false), http.StatusConflict, "operation-uncertain")

	// The compensation's record past its retention.
	n, err := g.Ledger.Purge(context.Background(), []string{"tickets.close"}, time.Now().Add(time.Minute), 100)
	require.NoError(t, err)
	require.Positive(t, n)
	requireProblem(t, g, compensate(ops.created, g.Key, nil, false), http.StatusGone, "idempotency-key-expired")
}

func conformMCP(t *testing.T, c *conformance, g *gatewaytest.Gateway) {
	stream := http.Header{"Accept": {"application/json, text/event-stream"}}
	mcpReq := func(method, apiKey, body string, h http.Header, outside bool) gatewaytest.Response {
		if h == nil {
			h = stream
		}
		return c.send(t, g, req{method: method, path: "/mcp", apiKey: apiKey, header: h, body: body, outside: outside})
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"oas","version":"1"}}}`
	assert.Equal(t, http.StatusOK, mcpReq(http.MethodPost, g.Key, initialize, nil, false).Status)
	list := mcpReq(http.MethodPost, g.Key, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil, false)
	require.Equal(t, http.StatusOK, list.Status)
	assert.Contains(t, string(list.Body), "operation_key")
	assert.Equal(t, http.StatusAccepted, mcpReq(http.MethodPost, g.Key, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, false).Status)
	// A method not served, on 2026-07-28: 404 with JSON-RPC -32601, as documented (issue 50 item 8).
	current := http.Header{"Accept": stream["Accept"], "Mcp-Protocol-Version": {"2026-07-28"}}
	unknown := mcpReq(http.MethodPost, g.Key, `{"jsonrpc":"2.0","id":4,"method":"prompts/list","params":{}}`, current, false)
	assert.Equal(t, http.StatusNotFound, unknown.Status, "%s", unknown.Body)
	assert.Contains(t, string(unknown.Body), "-32601")
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		assert.Equal(t, http.StatusMethodNotAllowed, mcpReq(m, g.Key, "", nil, false).Status, m)
	}
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		requireProblem(t, g, mcpReq(m, "", initialize, nil, true), http.StatusUnauthorized, "unauthenticated")
	}
	assert.Equal(t, http.StatusBadRequest, mcpReq(http.MethodPost, g.Key, initialize, http.Header{"Accept": {"application/json"}}, false).Status)
	assert.Equal(t, http.StatusUnsupportedMediaType,
		mcpReq(http.MethodPost, g.Key, initialize, http.Header{"Accept": stream["Accept"], "Content-Type": {"text/plain"}}, true).Status)
	huge := `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"x":"` + strings.Repeat("x", 5<<20) + `"}}`
	assert.Equal(t, http.StatusRequestEntityTooLarge, mcpReq(http.MethodPost, g.Key, huge, nil, false).Status)
	foreign := http.Header{"Accept": stream["Accept"], "Origin": {"https://evil.example"}}
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		requireProblem(t, g, mcpReq(m, g.Key, initialize, foreign, m != http.MethodPost), http.StatusForbidden, "origin-not-allowed")
	}
	batch := "[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","id":9,"method":"tools/list"},`, handlers.MCPMaxBatch+1), ",") + "]"
	old := http.Header{"Accept": stream["Accept"], "Mcp-Protocol-Version": {"2025-03-26"}}
	tooMany := mcpReq(http.MethodPost, g.Key, batch, old, true)
	assert.Equal(t, http.StatusBadRequest, tooMany.Status)
	assert.Contains(t, string(tooMany.Body), "at most 16")
}

func conformRateLimit(t *testing.T, c *conformance, g *gatewaytest.Gateway) {
	ticket := toolBody("tickets.create", ticketParams)
	id := requireOp(t, c.send(t, g, submitReq(g.Key, "rl-1", ticket, "")), http.StatusCreated)["id"].(string)
	r := c.send(t, g, submitReq(g.Key, "rl-2", ticket, ""))
	requireProblem(t, g, r, http.StatusTooManyRequests, "rate-limited")
	requireRetryAfter(t, r)
	r = c.send(t, g, req{method: http.MethodPost, path: "/v1/operations/" + id + "/compensate", apiKey: g.Key})
	requireProblem(t, g, r, http.StatusTooManyRequests, "rate-limited")
}

// conformUnavailable closes g's database: every request that needs the ledger fails closed.
func conformUnavailable(t *testing.T, c *conformance, g *gatewaytest.Gateway) {
	sqlDB, err := g.Ledger.DB().DB()
	require.NoError(t, err)
	require.NoError(t, sqlDB.Close())

	id := "op_01JD7X4T6V8Q0W9M3K5N2P1R8S"
	stream := http.Header{"Accept": {"application/json, text/event-stream"}}
	for _, r := range []req{
		submitReq(g.Key, "down-1", toolBody("tickets.create", ticketParams), ""),
		{method: http.MethodGet, path: "/v1/operations"},
		{method: http.MethodGet, path: "/v1/operations/" + id},
		{method: http.MethodGet, path: "/v1/operation-keys/down-1"},
		{method: http.MethodGet, path: "/v1/operations/" + id + "/events"},
		{method: http.MethodPost, path: "/v1/operations/" + id + "/cancel"},
		{method: http.MethodPost, path: "/v1/operations/" + id + "/compensate"},
		{method: http.MethodGet, path: "/v1/tools"},
		{method: http.MethodGet, path: "/v1/budgets"},
		{method: http.MethodPost, path: "/mcp", header: stream, body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{method: http.MethodGet, path: "/mcp", header: stream},
		{method: http.MethodDelete, path: "/mcp", header: stream},
	} {
		r.apiKey = g.Key
		resp := c.send(t, g, r)
		requireProblem(t, g, resp, http.StatusServiceUnavailable, "ledger-unavailable")
		requireRetryAfter(t, resp)
	}
	assert.Equal(t, http.StatusServiceUnavailable, c.send(t, g, req{method: http.MethodGet, path: "/readyz"}).Status)
}

// conformPolicy drives the answers of the tools file's policies and budgets: a refund a rule
// denies (403 policy-denied), one a budget charges, and the budgets' room (GET /v1/budgets).
func conformPolicy(t *testing.T, c *conformance, g *gatewaytest.Gateway) {
	requireOp(t, c.send(t, g, submitReq(g.Key, "oas-policy-small", toolBody("refunds.issue", refund("o-1", 1999)), "")), http.StatusCreated)
	r := c.send(t, g, submitReq(g.Key, "oas-policy-huge", toolBody("refunds.issue", refund("o-2", 2000000)), ""))
	requireProblem(t, g, r, http.StatusForbidden, "policy-denied")
	r = c.send(t, g, req{method: http.MethodGet, path: "/v1/budgets", apiKey: g.Key})
	assert.Equal(t, http.StatusOK, r.Status, string(r.Body))
	r = c.send(t, g, req{method: http.MethodGet, path: "/v1/budgets", outside: true})
	requireProblem(t, g, r, http.StatusUnauthorized, "unauthenticated")
}
