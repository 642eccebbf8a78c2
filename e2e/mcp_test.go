package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bearer adds an API key to every request of the MCP client.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// connectMCP connects the SDK's own client to the gateway's /mcp over Streamable HTTP.
func connectMCP(ctx context.Context, g *gatewaytest.Gateway, apiKey string) (*mcp.ClientSession, error) {
	hc := &http.Client{Transport: http.DefaultTransport}
	if apiKey != "" {
		hc.Transport = bearer{key: apiKey, next: http.DefaultTransport}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
}

func mcpSession(t *testing.T, g *gatewaytest.Gateway, apiKey string) *mcp.ClientSession {
	t.Helper()
	s, err := connectMCP(t.Context(), g, apiKey)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// callTool calls tool with arguments and the operation key in _meta ("" for none).
func callTool(t *testing.T, s *mcp.ClientSession, tool, key string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if key != "" {
		p.Meta = mcp.Meta{"idemgate/key": key}
	}
	res, err := s.CallTool(t.Context(), p)
	require.NoError(t, err, "tools/call is answered with a result, never a protocol error")
	return res
}

// structured decodes a result's structured content.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	return m
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestMCPToolsList: tools/list is the caller's catalogue, each state-changing tool's schema
// its params schema plus a required operation_key.
func TestMCPToolsList(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		limited := g.NewTenant(t, "acme", "ticket-bot", []string{"tickets.create"})
		rest := map[string]map[string]any{}
		for _, tl := range toolList(t, g, g.Key, "") {
			rest[tl["name"].(string)] = tl
		}

		res, err := mcpSession(t, g, g.Key).ListTools(t.Context(), nil)
		require.NoError(t, err)
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Title)
			assert.Equal(t, strings.ReplaceAll(tl.Title, ".", "__"), tl.Name, "listed under the name every provider takes, titled with its own")
			assert.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, tl.Name)
			b, err := json.Marshal(tl.InputSchema)
			require.NoError(t, err)
			var schema map[string]any
			require.NoError(t, json.Unmarshal(b, &schema))
			assert.Contains(t, schema["required"], "operation_key", "%s: every demo tool changes something", tl.Name)
			props := schema["properties"].(map[string]any)
			assert.Equal(t, "string", props["operation_key"].(map[string]any)["type"])

			// Without operation_key, the schema is the catalogue's.
			delete(props, "operation_key")
			var required []any
			for _, r := range schema["required"].([]any) {
				if r != "operation_key" {
					required = append(required, r)
				}
			}
			schema["required"] = required
			want := rest[tl.Title]["params_schema"].(map[string]any)
			if want["required"] == nil {
				delete(schema, "required")
			}
			assert.Equal(t, want, schema, "schema of %s", tl.Name)
			assert.Equal(t, rest[tl.Title]["description"], tl.Description)
		}
		assert.ElementsMatch(t, allTools, names)

		res, err = mcpSession(t, g, limited).ListTools(t.Context(), nil)
		require.NoError(t, err)
		require.Len(t, res.Tools, 1, "a key sees only its tools")
		assert.Equal(t, "tickets__create", res.Tools[0].Name)
		assert.Equal(t, "tickets.create", res.Tools[0].Title)
	})
}

// TestMCPToolsCall: tools/call runs through the ledger: a duplicate with the same key, in
// _meta or as operation_key, returns the same operation and runs nothing; refusals are error
// results naming their problem.
func TestMCPToolsCall(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		s := mcpSession(t, g, g.Key)
		args := map[string]any{"subject": "Printer on fire"}

		first := callTool(t, s, "tickets.create", "wf-9:create-ticket", args)
		require.False(t, first.IsError, resultText(first))
		op := structured(t, first)
		assert.Equal(t, "SUCCEEDED", op["state"])
		assert.Equal(t, "wf-9:create-ticket", op["key"])
		assert.Equal(t, "T-1001", op["downstream_ref"])
		assert.Equal(t, false, first.Meta["idemgate/replayed"])
		id := op["id"].(string)

		again := callTool(t, s, "tickets.create", "wf-9:create-ticket", args)
		require.False(t, again.IsError, resultText(again))
		assert.Equal(t, op, structured(t, again), "a duplicate returns the recorded operation")
		assert.Equal(t, true, again.Meta["idemgate/replayed"])
		assert.Contains(t, resultText(again), "nothing ran again")

		// The same key as an argument, and through the REST API: one operation.
		viaArg := callTool(t, s, "tickets.create", "", map[string]any{"subject": "Printer on fire", "operation_key": "wf-9:create-ticket"})
		assert.Equal(t, id, structured(t, viaArg)["id"])
		byKey := g.Do(t, http.MethodGet, "/v1/operations?key=wf-9:create-ticket", g.Key, nil, "")
		assert.Equal(t, id, requireOp(t, byKey, http.StatusOK)["id"])
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"), "one side effect")
		assert.Len(t, g.Sandbox.Requests("/tickets"), 1)

		refusals := []struct {
			name, key string
			args      map[string]any
			slug      string
		}{
			{"key reused with other arguments", "wf-9:create-ticket", map[string]any{"subject": "Printer fine"}, "idempotency-key-mismatch"},
			{"invalid params", "wf-9:other", map[string]any{"subject": 42}, "invalid-params"},
			{"no key", "", args, "idempotency-key-missing"},
			{"key with a control character", "wf\t9", args, "idempotency-key-invalid"},
		}
		ops := g.Count(t)
		for _, r := range refusals {
			t.Run(r.name, func(t *testing.T) {
				res := callTool(t, s, "tickets.create", r.key, r.args)
				require.True(t, res.IsError, resultText(res))
				p := structured(t, res)
				assert.Equal(t, "/problems/"+r.slug, p["type"])
				assert.Equal(t, r.slug, res.Meta["idemgate/problem"])
				assert.Contains(t, resultText(res), r.slug)
				switch r.slug {
				case "idempotency-key-mismatch":
					assert.Equal(t, id, p["operation_id"])
					assert.Equal(t, false, p["safe_to_retry_with_new_key"])
				case "invalid-params":
					assert.Equal(t, "/subject", p["errors"].([]any)[0].(map[string]any)["pointer"])
				}
			})
		}
		assert.Equal(t, ops, g.Count(t), "no refusal records an operation")
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"))
	})
}

// TestMCPUnknownOutcomeAsksForTheSameKey: an outcome idemgate cannot confirm is an error result
// (as every tool's not-final outcome is) that says so and asks to call again with the same key,
// never a new one; calling again changes nothing.
func TestMCPUnknownOutcomeAsksForTheSameKey(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/emails", Count: 1})
		s := mcpSession(t, g, g.Key)
		args := map[string]any{"to": "a@example.com", "subject": "Your refund", "body": "It is on its way."}

		res := callTool(t, s, "email.send", "wf-9:email", args)
		assert.True(t, res.IsError, "not final: an error result, as an upstream tool's: %s", resultText(res))
		op := structured(t, res)
		assert.Equal(t, "UNKNOWN", op["state"])
		assert.Equal(t, "operation-uncertain", res.Meta["idemgate/problem"])
		assert.Contains(t, resultText(res), "Do not retry with a new operation_key")

		again := callTool(t, s, "email.send", "wf-9:email", args)
		assert.True(t, again.IsError, resultText(again))
		assert.Equal(t, "operation-uncertain", again.Meta["idemgate/problem"])
		assert.Equal(t, op["id"], structured(t, again)["id"])
		assert.Equal(t, "UNKNOWN", structured(t, again)["state"])
		assert.Equal(t, 1, g.Sandbox.Committed("emails"), "the email went out once and was not sent again")
		assert.Len(t, g.Sandbox.Requests("/emails"), 1)
	})
}

// TestMCPRequiresAPIKey: /mcp takes the API's keys and refuses requests without one.
func TestMCPRequiresAPIKey(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
		accept := map[string]string{"Accept": "application/json, text/event-stream"}
		for name, key := range map[string]string{"no key": "", "unknown key": "idg_" + strings.Repeat("A", 43)} {
			t.Run(name, func(t *testing.T) {
				r := g.Do(t, http.MethodPost, "/mcp", key, accept, initialize)
				requireProblem(t, g, r, http.StatusUnauthorized, "unauthenticated")
			})
		}
		_, err := connectMCP(t.Context(), g, "")
		require.Error(t, err, "the SDK's client cannot connect without a key")

		ok := g.Do(t, http.MethodPost, "/mcp", g.Key, accept, initialize)
		require.Equal(t, http.StatusOK, ok.Status, "%s", ok.Body)
		assert.Contains(t, string(ok.Body), `"serverInfo"`)
	})
}
