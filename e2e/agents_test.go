package e2e_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withReadTool is the test catalogue with a read tool, as the demo catalogue has one.
const withReadTool = gatewaytest.Tools + `
  - name: tickets.get
    description: Read a ticket
    effect: read
    params_schema:
      type: object
      required: [ticket_id]
      additionalProperties: false
      properties:
        ticket_id: {type: string, pattern: "^T-[0-9]+$"}
    http:
      method: GET
      url: "{{SANDBOX}}/tickets/{{.Params.ticket_id}}"
      timeout: 1s
`

// TestLookupByKey: GET /v1/operation-keys/{key} answers what GET /v1/operations?key= answers,
// for any printable key once percent-encoded, and like it hides other tenants' operations and
// those of tools the key may not use.
func TestLookupByKey(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		refundsOnly := g.NewTenant(t, "acme", "refund-bot", []string{"refunds.issue"})
		otherTenant := g.NewTenant(t, "globex", "bot", nil)
		byKey := func(apiKey, key string) gatewaytest.Response {
			return g.Do(t, http.MethodGet, "/v1/operation-keys/"+url.PathEscape(key), apiKey, nil, "")
		}

		for _, key := range []string{"wf-1:create", "tenant/a b?c=%25#x", `say "hi"`, "~!*'();:@&=+$,"} {
			created := requireOp(t, g.Submit(t, key, "tickets.create", ticketParams, nil), http.StatusCreated)
			found := requireOp(t, byKey(g.Key, key), http.StatusOK)
			assert.Equal(t, created, found, "key %q", key)
			legacy := requireOp(t, g.Do(t, http.MethodGet, "/v1/operations?key="+url.QueryEscape(key), g.Key, nil, ""), http.StatusOK)
			assert.Equal(t, found, legacy, "the same answer as ?key= for %q", key)
			requireProblem(t, g, byKey(refundsOnly, key), http.StatusNotFound, "not-found")
			requireProblem(t, g, byKey(otherTenant, key), http.StatusNotFound, "not-found")
		}
		requireProblem(t, g, byKey(g.Key, "never-used"), http.StatusNotFound, "not-found")
		requireProblem(t, g, byKey("", "wf-1:create"), http.StatusUnauthorized, "unauthenticated")
		assert.Equal(t, 4, g.Sandbox.Committed("tickets"))
	})
}

// TestNullMeansAbsent: a null for an optional param whose schema refuses null (what OpenAI's
// strict mode sends) is the param left out: the same params, the same fingerprint, a replay;
// over the API and over MCP. A null for a required param is still refused.
func TestNullMeansAbsent(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		first := g.Submit(t, "null-1", "tickets.create", `{"subject":"s","priority":null,"body":null}`, nil)
		op := requireOp(t, first, http.StatusCreated)
		assert.Equal(t, map[string]any{"subject": "s"}, op["params"])
		requireReplay(t, g.Submit(t, "null-1", "tickets.create", `{"subject":"s"}`, nil), first)

		plain := requireOp(t, g.Submit(t, "null-2", "tickets.create", `{"subject":"s"}`, nil), http.StatusCreated)
		assert.Equal(t, plain["fingerprint"], op["fingerprint"], "{\"priority\": null} and {} have one fingerprint")

		res := callTool(t, mcpSession(t, g, g.Key), "tickets.create", "null-1", map[string]any{"subject": "s", "priority": nil})
		require.False(t, res.IsError, resultText(res))
		assert.Equal(t, op["id"], structured(t, res)["id"], "the MCP call with a null replays too")
		assert.Equal(t, true, res.Meta["idemgate/replayed"])

		requireProblem(t, g, g.Submit(t, "null-3", "tickets.create", `{"subject":null}`, nil), http.StatusBadRequest, "invalid-params")
		assert.Equal(t, 2, g.Sandbox.Committed("tickets"), "one ticket per key")
		assert.EqualValues(t, 2, g.Count(t))
	})
}

// TestMCPToolsAsListed: GET /v1/tools?format=mcp is what tools/list says; every tool has an
// outputSchema, and the structured content of results, refusals included, is valid against it.
func TestMCPToolsAsListed(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: withReadTool})
		s := mcpSession(t, g, g.Key)
		listed, err := s.ListTools(t.Context(), nil)
		require.NoError(t, err)
		var rest struct{ Tools []json.RawMessage }
		r := g.Do(t, http.MethodGet, "/v1/tools?format=mcp", g.Key, nil, "")
		require.Equal(t, http.StatusOK, r.Status)
		require.NoError(t, json.Unmarshal(r.Body, &rest))
		require.Len(t, rest.Tools, len(listed.Tools))
		restByName := map[string]string{}
		for _, raw := range rest.Tools {
			var tl struct{ Name string }
			require.NoError(t, json.Unmarshal(raw, &tl))
			restByName[tl.Name] = string(raw)
		}
		var names []string
		for _, tl := range listed.Tools {
			b, err := json.Marshal(tl)
			require.NoError(t, err)
			assert.JSONEq(t, restByName[tl.Name], string(b), "%s: GET /v1/tools?format=mcp says what tools/list says", tl.Name)
			require.NotNil(t, tl.OutputSchema, tl.Name)
			names = append(names, tl.Name)
		}
		sort.Strings(names)
		assert.Equal(t, []string{"email__send", "payments__payout", "refunds__issue", "tickets__close", "tickets__create", "tickets__get"}, names)

		schema := compileOutputSchema(t, listed.Tools[0].OutputSchema)
		for _, res := range []*mcp.CallToolResult{
			callTool(t, s, "tickets.create", "out-1", map[string]any{"subject": "s"}),                                         // an operation
			callTool(t, s, "tickets.create", "out-1", map[string]any{"subject": "other"}),                                     // a refusal: key mismatch
			callTool(t, s, "tickets.create", "out-2", map[string]any{"subject": 7}),                                           // a refusal: invalid params
			callTool(t, s, "payments.payout", "out-3", map[string]any{"order_id": "o", "currency": "EUR", "amount_cents": 5}), // awaiting approval
		} {
			assert.NoError(t, schema.Validate(structuredValue(t, res)), resultText(res))
		}
	})
}

// TestMCPReadAndKeys: a read tool may be called without a key, each call its own operation;
// a key with a non-ASCII character is refused as non-ASCII, and records nothing.
func TestMCPReadAndKeys(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: withReadTool})
		s := mcpSession(t, g, g.Key)
		ticket := structured(t, callTool(t, s, "tickets.create", "read-1", map[string]any{"subject": "s"}))
		ref := ticket["downstream_ref"]
		require.NotEmpty(t, ref)

		a := callTool(t, s, "tickets.get", "", map[string]any{"ticket_id": ref})
		b := callTool(t, s, "tickets.get", "", map[string]any{"ticket_id": ref})
		require.False(t, a.IsError, resultText(a))
		require.False(t, b.IsError, resultText(b))
		opA, opB := structured(t, a), structured(t, b)
		assert.Equal(t, "SUCCEEDED", opA["state"])
		assert.Equal(t, ref, opA["result"].(map[string]any)["id"])
		assert.NotEqual(t, opA["id"], opB["id"], "a read without a key is recorded under a key of its own")
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"), "reading committed nothing")

		before := g.Count(t)
		res := callTool(t, s, "tickets.create", "", map[string]any{"subject": "s", "operation_key": "café:1"})
		require.True(t, res.IsError)
		p := structured(t, res)
		assert.Equal(t, "/problems/idempotency-key-invalid", p["type"])
		assert.Contains(t, p["detail"], "non-ASCII character")
		assert.NotContains(t, p["detail"], "non-printable")
		assert.Equal(t, before, g.Count(t), "a refused call records nothing")
		r := g.Submit(t, "café", "tickets.create", ticketParams, nil)
		assert.Contains(t, requireProblem(t, g, r, http.StatusBadRequest, "idempotency-key-invalid")["detail"], "non-ASCII character")
	})
}

func compileOutputSchema(t *testing.T, s any) *jsonschema.Schema {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytesReader(b))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("urn:idemgate:mcp-output", doc))
	sch, err := c.Compile("urn:idemgate:mcp-output")
	require.NoError(t, err)
	return sch
}

func structuredValue(t *testing.T, res *mcp.CallToolResult) any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	v, err := jsonschema.UnmarshalJSON(bytesReader(b))
	require.NoError(t, err)
	return v
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
