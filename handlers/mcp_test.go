package handlers

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/handlers/headers"
	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models/fingerprint"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mcpToolsYAML = `
tools:
  - name: orders.lookup
    description: Look up an order
    effect: read
    params_schema:
      type: object
      required: [order_id]
      additionalProperties: false
      properties:
        order_id: {type: string}
    http: {method: GET, url: "http://127.0.0.1:9/orders/{{.Params.order_id}}"}
  - name: tickets.create
    description: Create a ticket
    effect: write
    params_schema:
      type: object
      additionalProperties: false
      properties:
        subject: {type: string}
    http: {url: "http://127.0.0.1:9/tickets"}
`

func mcpCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Load([]byte(mcpToolsYAML))
	require.NoError(t, err)
	return cat
}

// TestInputSchema: a state-changing tool requires operation_key, a read offers it; the
// catalogue's schema is left as it was.
func TestInputSchema(t *testing.T) {
	t.Parallel()
	cat := mcpCatalog(t)
	read, _ := cat.Get("orders.lookup")
	write, _ := cat.Get("tickets.create")
	before, err := json.Marshal(write.ParamsSchemaRaw)
	require.NoError(t, err)

	rs := inputSchema(read)
	assert.Equal(t, []any{"order_id"}, rs["required"], "a read need not name its operation")
	assert.Contains(t, rs["properties"], MCPKeyArgument)

	ws := inputSchema(write)
	assert.Equal(t, []any{MCPKeyArgument}, ws["required"])
	assert.Contains(t, ws["properties"], "subject")
	assert.Contains(t, ws["properties"], MCPKeyArgument)
	assert.Equal(t, false, ws["additionalProperties"])

	after, err := json.Marshal(write.ParamsSchemaRaw)
	require.NoError(t, err)
	assert.JSONEq(t, string(before), string(after), "the catalogue's schema is shared and must not change")
	assert.True(t, mcpTool(read).Annotations.ReadOnlyHint)
	assert.False(t, mcpTool(write).Annotations.ReadOnlyHint)
}

// TestReadMCPCall: where the key comes from, and what is refused as the API refuses it.
func TestReadMCPCall(t *testing.T) {
	t.Parallel()
	cat := mcpCatalog(t)
	read, _ := cat.Get("orders.lookup")
	write, _ := cat.Get("tickets.create")

	rows := []struct {
		name   string
		tool   *catalog.Tool
		meta   mcp.Meta
		args   string
		key    string // "" with slug set: refused
		params string
		slug   string
	}{
		{name: "key in _meta", tool: write, meta: mcp.Meta{MCPMetaKey: "wf:1"}, args: `{"subject":"s"}`, key: "wf:1", params: `{"subject":"s"}`},
		{name: "key as argument", tool: write, args: `{"subject":"s","operation_key":"wf:1"}`, key: "wf:1", params: `{"subject":"s"}`},
		{name: "both, agreeing", tool: write, meta: mcp.Meta{MCPMetaKey: "wf:1"}, args: `{"operation_key":"wf:1","subject":"s"}`, key: "wf:1", params: `{"subject":"s"}`},
		{name: "arguments canonical", tool: write, meta: mcp.Meta{MCPMetaKey: "k"}, args: ` { "b" : 1.0, "a" : "x" } `, key: "k", params: `{"a":"x","b":1}`},
		{name: "no arguments", tool: write, meta: mcp.Meta{MCPMetaKey: "k"}, key: "k", params: `{}`},
		{name: "quotes are part of the key", tool: write, meta: mcp.Meta{MCPMetaKey: `"k"`}, key: `"k"`, params: `{}`},
		{name: "both, disagreeing: the runtime's key is used", tool: write, meta: mcp.Meta{MCPMetaKey: "a"}, args: `{"operation_key":"b"}`, key: "a", params: `{}`},
		{name: "params.idempotencyKey first", tool: write, meta: mcp.Meta{MCPMetaRuntimeKey: "run-1:call-7", MCPMetaKey: "a"},
			args: `{"operation_key":"b","subject":"s"}`, key: "run-1:call-7", params: `{"subject":"s"}`},
		{name: "params.idempotencyKey not a string", tool: write, meta: mcp.Meta{MCPMetaRuntimeKey: 7.0}, slug: problems.IdempotencyKeyInvalid},
		{name: "no key on a write", tool: write, args: `{"subject":"s"}`, slug: problems.IdempotencyKeyMissing},
		{name: "empty key", tool: write, meta: mcp.Meta{MCPMetaKey: ""}, slug: problems.IdempotencyKeyInvalid},
		{name: "key too long", tool: write, meta: mcp.Meta{MCPMetaKey: strings.Repeat("k", 256)}, slug: problems.IdempotencyKeyInvalid},
		{name: "non-ASCII key", tool: write, args: `{"operation_key":"caf\u00e9"}`, slug: problems.IdempotencyKeyInvalid},
		{name: "key not a string", tool: write, meta: mcp.Meta{MCPMetaKey: 7.0}, slug: problems.IdempotencyKeyInvalid},
		{name: "argument key not a string", tool: write, args: `{"operation_key":7}`, slug: problems.IdempotencyKeyInvalid},
		{name: "arguments not an object", tool: write, meta: mcp.Meta{MCPMetaKey: "k"}, args: `[1]`, slug: problems.MalformedBody},
		{name: "duplicate names", tool: write, meta: mcp.Meta{MCPMetaKey: "k"}, args: `{"a":1,"a":2}`, slug: problems.MalformedBody},
		{name: "wait not a number", tool: write, meta: mcp.Meta{MCPMetaKey: "k", MCPMetaWait: "10"}, slug: problems.MalformedBody},
		{name: "run id not a string", tool: write, meta: mcp.Meta{MCPMetaKey: "k", MCPMetaRunID: 1.0}, slug: problems.MalformedBody},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			c, err := readMCPCall(r.tool, &mcp.CallToolParamsRaw{Meta: r.meta, Arguments: json.RawMessage(r.args)})
			if r.slug != "" {
				require.Error(t, err)
				assert.Equal(t, r.slug, ProblemFrom(err).Slug, "%v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, r.key, c.key)
			assert.Equal(t, r.params, string(c.req.Params))
			canon, err := fingerprint.Normalize(c.req.Params)
			require.NoError(t, err)
			assert.Equal(t, string(canon), string(c.req.Params), "params are canonical")
		})
	}

	t.Run("a read without a key gets one of its own", func(t *testing.T) {
		a, err := readMCPCall(read, &mcp.CallToolParamsRaw{Arguments: json.RawMessage(`{"order_id":"1"}`)})
		require.NoError(t, err)
		b, err := readMCPCall(read, &mcp.CallToolParamsRaw{Arguments: json.RawMessage(`{"order_id":"1"}`)})
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(a.key, "mcp-read:"), a.key)
		assert.NotEqual(t, a.key, b.key)
	})
	t.Run("wait and workflow from _meta", func(t *testing.T) {
		c, err := readMCPCall(write, &mcp.CallToolParamsRaw{Meta: mcp.Meta{MCPMetaKey: "k", MCPMetaWait: 300.0,
			MCPMetaRunID: "wf-1", MCPMetaStepID: "create"}})
		require.NoError(t, err)
		assert.Equal(t, headers.MaxWait, c.wait, "clamped as Prefer: wait is")
		assert.Equal(t, "wf-1", c.req.WorkflowRunID)
		assert.Equal(t, "create", c.req.StepID)
	})
}

// TestOutputSchema: every native tool lists the one compact output schema, in which an
// operation object and a problem details object are both valid and other objects are not.
func TestOutputSchema(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(operationOutputSchema)
	require.NoError(t, err)
	assert.Less(t, len(b), 1024, "small enough to repeat on every tool")
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	require.NoError(t, c.AddResource("out.json", doc))
	schema, err := c.Compile("out.json")
	require.NoError(t, err)
	for _, valid := range []string{`{"id":"op_1","state":"SUCCEEDED","result":{"id":"t1"}}`,
		`{"type":"https://idemgate.dev/problems/invalid-params","title":"Invalid params","status":400}`} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(valid))
		require.NoError(t, err)
		assert.NoError(t, schema.Validate(v), valid)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"ok":true}`))
	require.NoError(t, err)
	assert.Error(t, schema.Validate(v))
	cat := mcpCatalog(t)
	for _, tl := range cat.Tools() {
		assert.Equal(t, operationOutputSchema, mcpTool(tl).OutputSchema, tl.Name)
	}
}

// hintsLister lists upstream tools with the annotations the test gives them.
type hintsLister []catalog.UpstreamTool

func (l hintsLister) ListTools(*catalog.MCPServer) ([]catalog.UpstreamTool, error) { return l, nil }

// TestMCPUpstreamHints (issue 50 item 7): /mcp keeps an upstream tool's own destructiveHint
// unless the tool's effect decides it (a write is destructive, a read is not): an idempotent
// update that says destructiveHint false stays false, an idempotent delete that says true stays
// true (it was served false), one that says nothing is not destructive; a tool the tools file
// makes a write is destructive whatever its server says.
func TestMCPUpstreamHints(t *testing.T) {
	t.Parallel()
	no, yes := false, true
	ann := func(destructive *bool, idempotent bool) map[string]any {
		m := map[string]any{"idempotentHint": idempotent}
		if destructive != nil {
			m["destructiveHint"] = *destructive
		}
		return m
	}
	upstream := hintsLister{
		{Name: "update_note", Description: "d", InputSchema: map[string]any{"type": "object"}, Annotations: ann(&no, true)},
		{Name: "delete_note", Description: "d", InputSchema: map[string]any{"type": "object"}, Annotations: ann(&yes, true)},
		{Name: "touch_note", Description: "d", InputSchema: map[string]any{"type": "object"}, Annotations: ann(nil, true)},
		{Name: "rename_note", Description: "d", InputSchema: map[string]any{"type": "object"}, Annotations: ann(&no, true)},
		{Name: "read_note", Description: "d", InputSchema: map[string]any{"type": "object"},
			Annotations: map[string]any{"readOnlyHint": true, "destructiveHint": true}},
	}
	c, err := catalog.LoadWith([]byte(`mcp_servers:
  - name: notes
    command: [notes-server]
    tools:
      - upstream: update_note
      - upstream: delete_note
      - upstream: touch_note
      - upstream: rename_note
        effect: write
      - upstream: read_note
`), catalog.Options{MCP: upstream})
	require.NoError(t, err)
	for name, want := range map[string]bool{"notes.update_note": false, "notes.delete_note": true, "notes.touch_note": false,
		"notes.rename_note": true, "notes.read_note": false} {
		tl, ok := c.Get(name)
		require.True(t, ok, name)
		a := mcpTool(tl).Annotations
		require.NotNil(t, a.DestructiveHint, name)
		assert.Equal(t, want, *a.DestructiveHint, "%s (effect %s)", name, tl.Effect)
		assert.True(t, a.IdempotentHint, name)
	}
}
