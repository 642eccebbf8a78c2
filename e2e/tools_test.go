package e2e_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var allTools = []string{"tickets.create", "tickets.close", "refunds.issue", "email.send", "payments.payout"}

func toolList(t testing.TB, g *gatewaytest.Gateway, apiKey, query string) []map[string]any {
	t.Helper()
	r := g.Do(t, http.MethodGet, "/v1/tools"+query, apiKey, nil, "")
	require.Equal(t, http.StatusOK, r.Status, "GET /v1/tools%s: %s", query, r.Body)
	var body map[string][]map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &body), "%s", r.Body)
	assert.Len(t, body, 1, "the answer is {tools: [...]}")
	return body["tools"]
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestToolDefinitions: GET /v1/tools in every format, with only the caller's tools.
func TestToolDefinitions(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		limited := g.NewTenant(t, "acme", "ticket-bot", []string{"tickets.create", "tickets.close"})

		t.Run("default", func(t *testing.T) {
			for _, query := range []string{"", "?format=default"} {
				tools := toolList(t, g, g.Key, query)
				var names []string
				for _, tl := range tools {
					assert.ElementsMatch(t, []string{"name", "description", "effect", "params_schema", "requires_approval"}, keysOf(tl))
					names = append(names, tl["name"].(string))
					assert.NotEmpty(t, tl["description"])
					schema, ok := tl["params_schema"].(map[string]any)
					require.True(t, ok, "params_schema of %s", tl["name"])
					assert.Equal(t, "object", schema["type"])
					assert.Equal(t, tl["name"] == "payments.payout", tl["requires_approval"], "requires_approval of %s", tl["name"])
					want := map[string]string{"tickets.close": "idempotent"}[tl["name"].(string)]
					if want == "" {
						want = "write"
					}
					assert.Equal(t, want, tl["effect"], "effect of %s", tl["name"])
				}
				assert.ElementsMatch(t, allTools, names)
			}
		})
		t.Run("openai", func(t *testing.T) {
			tools := toolList(t, g, g.Key, "?format=openai")
			var names []string
			for _, tl := range tools {
				assert.ElementsMatch(t, []string{"type", "function"}, keysOf(tl))
				assert.Equal(t, "function", tl["type"])
				fn, _ := tl["function"].(map[string]any)
				assert.ElementsMatch(t, []string{"name", "description", "parameters"}, keysOf(fn))
				assert.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, fn["name"])
				assert.IsType(t, map[string]any{}, fn["parameters"])
				names = append(names, fn["name"].(string))
			}
			assert.ElementsMatch(t, []string{"tickets__create", "tickets__close", "refunds__issue", "email__send", "payments__payout"}, names)
		})
		t.Run("anthropic", func(t *testing.T) {
			tools := toolList(t, g, g.Key, "?format=anthropic")
			var names []string
			for _, tl := range tools {
				assert.ElementsMatch(t, []string{"name", "description", "input_schema"}, keysOf(tl))
				assert.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, tl["name"])
				assert.IsType(t, map[string]any{}, tl["input_schema"])
				names = append(names, tl["name"].(string))
			}
			assert.ElementsMatch(t, []string{"tickets__create", "tickets__close", "refunds__issue", "email__send", "payments__payout"}, names)
		})
		t.Run("mcp", func(t *testing.T) {
			tools := toolList(t, g, g.Key, "?format=mcp")
			var names []string
			for _, tl := range tools {
				assert.ElementsMatch(t, []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta"}, keysOf(tl))
				assert.IsType(t, map[string]any{}, tl["inputSchema"])
				assert.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, tl["name"])
				assert.Equal(t, tl["title"], tl["_meta"].(map[string]any)["idemgate/tool"])
				names = append(names, tl["title"].(string))
			}
			assert.ElementsMatch(t, allTools, names)
		})
		t.Run("only the caller's tools", func(t *testing.T) {
			for query, want := range map[string][]string{
				"":                  {"tickets.create", "tickets.close"},
				"?format=mcp":       {"tickets__create", "tickets__close"},
				"?format=openai":    {"tickets__create", "tickets__close"},
				"?format=anthropic": {"tickets__create", "tickets__close"},
			} {
				var names []string
				for _, tl := range toolList(t, g, limited, query) {
					if fn, ok := tl["function"].(map[string]any); ok {
						tl = fn
					}
					names = append(names, tl["name"].(string))
				}
				assert.ElementsMatch(t, want, names, "format %q", query)
			}
		})
		t.Run("openai strict and responses", func(t *testing.T) {
			for _, tl := range toolList(t, g, g.Key, "?format=openai&strict=true") {
				fn := tl["function"].(map[string]any)
				assert.ElementsMatch(t, []string{"name", "description", "parameters", "strict"}, keysOf(fn))
				assert.Equal(t, true, fn["strict"], "every test tool can be strict: %s", fn["name"])
				params := fn["parameters"].(map[string]any)
				props := params["properties"].(map[string]any)
				assert.Len(t, params["required"], len(props), "%s: every param required", fn["name"])
				assert.Equal(t, false, params["additionalProperties"], fn["name"])
			}
			for _, tl := range toolList(t, g, g.Key, "?format=openai&api=responses") {
				assert.ElementsMatch(t, []string{"type", "name", "description", "parameters", "strict"}, keysOf(tl))
				assert.Equal(t, false, tl["strict"])
			}
			for _, q := range []string{"?format=anthropic&strict=true", "?api=responses", "?format=openai&api=assistants",
				"?format=openai&strict=yes", "?format=mcp&strict=false"} {
				requireProblem(t, g, g.Do(t, http.MethodGet, "/v1/tools"+q, g.Key, nil, ""), http.StatusBadRequest, "invalid-query")
			}
		})
		t.Run("unsupported format", func(t *testing.T) {
			for _, f := range []string{"xml", "yaml"} {
				r := g.Do(t, http.MethodGet, "/v1/tools?format="+f, g.Key, nil, "")
				requireProblem(t, g, r, http.StatusBadRequest, "unsupported-format")
			}
		})
		t.Run("unauthenticated", func(t *testing.T) {
			requireProblem(t, g, g.Do(t, http.MethodGet, "/v1/tools", "", nil, ""), http.StatusUnauthorized, "unauthenticated")
		})
	})
}

// TestFunctionNameSpelling: tickets__create is tickets.create: the same tool, the same
// fingerprint, so the same key replays.
func TestFunctionNameSpelling(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)

		first := g.Submit(t, "spelling-1", "tickets.create", ticketParams, nil)
		op := requireOp(t, first, http.StatusCreated)
		replay := g.Submit(t, "spelling-1", "tickets__create", ticketParams, nil)
		requireReplay(t, replay, first)

		// And the other way round: created with the function name, recorded with the dotted one.
		second := g.Submit(t, "spelling-2", "tickets__create", ticketParams, nil)
		op2 := requireOp(t, second, http.StatusCreated)
		assert.Equal(t, "tickets.create", op2["tool"])
		assert.Equal(t, op["fingerprint"], op2["fingerprint"], "the fingerprint uses the dotted name")
		requireReplay(t, g.Submit(t, "spelling-2", "tickets.create", ticketParams, nil), second)

		// The filter and the forbidden check use the dotted name too.
		assert.Len(t, list(t, g, "tool=tickets.create").Operations, 2)
		limited := g.NewTenant(t, "acme", "refund-bot", []string{"refunds.issue"})
		requireProblem(t, g, submitAs(t, g, limited, "spelling-3", "tickets__create", ticketParams, nil),
			http.StatusForbidden, "tool-forbidden")
		requireProblem(t, g, g.Submit(t, "spelling-4", "tickets_create", ticketParams, nil),
			http.StatusNotFound, "unknown-tool")

		assert.Equal(t, 2, g.Sandbox.Committed("tickets"))
		assert.EqualValues(t, 2, g.Count(t))
	})
}
