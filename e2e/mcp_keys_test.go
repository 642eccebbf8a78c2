package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runtimeKeys is a client transport that does what an agent runtime supporting MCP's Request
// Idempotency proposal (SEP-3182) does: it puts a key of its own in params.idempotencyKey of
// every tools/call, which the Go SDK's types have no field for.
type runtimeKeys struct {
	key  string
	next http.RoundTripper
}

func (rk runtimeKeys) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || rk.key == "" {
		return rk.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var msg map[string]any
	if json.Unmarshal(body, &msg) == nil && msg["method"] == "tools/call" {
		msg["params"].(map[string]any)["idempotencyKey"] = rk.key
		body, _ = json.Marshal(msg)
	}
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return rk.next.RoundTrip(r)
}

// TestMCPRuntimeKeysOnEveryRevision: params.idempotencyKey names the operation on 2026-07-28
// (the SDK's own client, which negotiates it) and on 2025-11-25 (raw JSON-RPC): two calls make
// one effect; an operation_key the model also filled in is not used and refuses nothing; the
// same key with other arguments is refused as on the JSON API. Each leg checks the revision it
// is on. Both engines.
func TestMCPRuntimeKeysOnEveryRevision(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)

		// 2026-07-28, through the SDK's client with a runtime that supplies keys.
		hc := &http.Client{Transport: runtimeKeys{key: "run-7:call-1", next: bearer{key: g.Key, next: http.DefaultTransport}}}
		c := mcp.NewClient(&mcp.Implementation{Name: "e2e-runtime", Version: "1"}, nil)
		s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		t.Logf("negotiated %s", s.InitializeResult().ProtocolVersion)
		require.Equal(t, "2026-07-28", s.InitializeResult().ProtocolVersion, "the SDK's client negotiates 2026-07-28")
		first, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "tickets__create",
			Arguments: map[string]any{"subject": "Printer", "operation_key": "the-model-made-this-up"}})
		require.NoError(t, err)
		require.False(t, first.IsError, resultText(first))
		op := structured(t, first)
		assert.Equal(t, "run-7:call-1", op["key"], "the runtime's key, not the model's")
		again, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "tickets.create",
			Arguments: map[string]any{"subject": "Printer", "operation_key": "another-invention"}})
		require.NoError(t, err)
		require.False(t, again.IsError, resultText(again))
		assert.Equal(t, op["id"], structured(t, again)["id"], "the dotted name is the same tool, the same key the same operation")
		assert.Equal(t, true, again.Meta["idemgate/replayed"])
		other, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "tickets__create", Arguments: map[string]any{"subject": "Scanner"}})
		require.NoError(t, err)
		assert.True(t, other.IsError)
		assert.Equal(t, "idempotency-key-mismatch", other.Meta["idemgate/problem"])
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"))

		// 2025-11-25, raw.
		h := map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
		rpc := func(body string) map[string]any {
			t.Helper()
			r := g.Do(t, http.MethodPost, "/mcp", g.Key, h, body)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			var m map[string]any
			require.NoError(t, json.Unmarshal(r.Body, &m), "%s", r.Body)
			require.Nil(t, m["error"], "%s", r.Body)
			return m["result"].(map[string]any)
		}
		init := rpc(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
		assert.Equal(t, "2025-11-25", init["protocolVersion"], "the raw leg is on 2025-11-25")
		call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tickets__create","idempotencyKey":"run-8:call-1",` +
			`"arguments":{"subject":"Lamp","operation_key":"model-key"}}}`
		var lamp string
		for i := range 2 {
			r := g.Do(t, http.MethodPost, "/mcp", g.Key, h, call)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			assert.Contains(t, string(r.Body), `\"key\":\"run-8:call-1\"`)
			// §5a: an operation_key other than params.idempotencyKey is not used and never
			// makes the call fail, on this revision as on 2026-07-28.
			var m map[string]any
			require.NoError(t, json.Unmarshal(r.Body, &m), "%s", r.Body)
			require.Nil(t, m["error"], "%s", r.Body)
			res := m["result"].(map[string]any)
			assert.NotEqual(t, true, res["isError"], "a differing operation_key refuses nothing: %s", r.Body)
			sc := res["structuredContent"].(map[string]any)
			assert.Equal(t, "run-8:call-1", sc["key"])
			if i == 0 {
				lamp = sc["id"].(string)
			} else {
				assert.Equal(t, lamp, sc["id"], "the same key the same operation")
			}
		}
		// The same params.idempotencyKey with other arguments is refused, as on 2026-07-28.
		mismatch := rpc(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"tickets__create","idempotencyKey":"run-8:call-1",` +
			`"arguments":{"subject":"Desk","operation_key":"model-key"}}}`)
		assert.Equal(t, true, mismatch["isError"])
		assert.Equal(t, "idempotency-key-mismatch", mismatch["_meta"].(map[string]any)["idemgate/problem"])
		assert.Equal(t, 2, g.Sandbox.Committed("tickets"), "one more ticket for two calls")
		assert.EqualValues(t, 2, g.Count(t))
	})
}

// TestMCPListingAndErrors: tools/list names every tool as the providers take them, says what
// each needs (approval, effect) and is cacheable only privately; initialize advertises the
// idempotency capability; a method not served is a JSON-RPC error on every revision.
func TestMCPListingAndErrors(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		h := map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
		rpc := func(body string) map[string]any {
			r := g.Do(t, http.MethodPost, "/mcp", g.Key, h, body)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			var m map[string]any
			require.NoError(t, json.Unmarshal(r.Body, &m), "%s", r.Body)
			return m
		}
		init := rpc(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
		caps := init["result"].(map[string]any)["capabilities"].(map[string]any)
		assert.Equal(t, map[string]any{"idempotency": map[string]any{"keyField": "idempotencyKey"}}, caps["tools"])
		assert.NotContains(t, caps, "prompts")
		assert.NotContains(t, caps, "resources")

		list := rpc(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)["result"].(map[string]any)
		assert.Equal(t, "private", list["cacheScope"], "the list depends on the key")
		byTitle := map[string]map[string]any{}
		for _, raw := range list["tools"].([]any) {
			tl := raw.(map[string]any)
			assert.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, tl["name"])
			byTitle[tl["title"].(string)] = tl
		}
		payout := byTitle["payments.payout"]
		require.NotNil(t, payout)
		assert.Equal(t, "payments__payout", payout["name"])
		meta := payout["_meta"].(map[string]any)
		assert.Equal(t, true, meta["idemgate/requires_approval"])
		assert.EqualValues(t, 1, meta["idemgate/approvals"])
		assert.Equal(t, "write", meta["idemgate/effect"])
		assert.Equal(t, true, payout["annotations"].(map[string]any)["destructiveHint"])
		assert.NotContains(t, byTitle["tickets.create"]["_meta"], "idemgate/requires_approval")

		for _, method := range []string{"prompts/list", "resources/list", "tasks/list", "no/such"} {
			for _, v := range []string{"2025-06-18", "2025-11-25"} {
				h["MCP-Protocol-Version"] = v
				m := rpc(`{"jsonrpc":"2.0","id":9,"method":"` + method + `","params":{}}`)
				require.NotNil(t, m["error"], "%s on %s", method, v)
				assert.EqualValues(t, -32601, m["error"].(map[string]any)["code"], "%s on %s", method, v)
				assert.EqualValues(t, 9, m["id"])
			}
		}
		h["MCP-Protocol-Version"] = "2025-06-18" // before tasks
		m := rpc(`{"jsonrpc":"2.0","id":10,"method":"tasks/get","params":{"taskId":"op_1"}}`)
		assert.EqualValues(t, -32601, m["error"].(map[string]any)["code"])

		// 2026-07-28: a method not served is still the JSON-RPC error -32601 (§5a), answered
		// with HTTP 404 as that revision's Streamable HTTP transport says; never a 400 in plain text.
		for _, method := range []string{"prompts/list", "resources/list", "logging/setLevel", "no/such"} {
			r := g.Do(t, http.MethodPost, "/mcp", g.Key, map[string]string{"Accept": "application/json, text/event-stream",
				"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method},
				`{"jsonrpc":"2.0","id":11,"method":"`+method+`","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
			assert.Equal(t, http.StatusNotFound, r.Status, "%s on 2026-07-28: %s", method, r.Body)
			var m map[string]any
			require.NoError(t, json.Unmarshal(r.Body, &m), "%s on 2026-07-28: a JSON-RPC answer: %s", method, r.Body)
			require.NotNil(t, m["error"], "%s on 2026-07-28", method)
			assert.EqualValues(t, -32601, m["error"].(map[string]any)["code"], "%s on 2026-07-28", method)
			assert.EqualValues(t, 11, m["id"])
		}
	})
}
