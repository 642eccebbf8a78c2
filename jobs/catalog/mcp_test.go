package catalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listed is an MCPLister that answers a fixed tools/list per server, and counts its calls.
type listed struct {
	tools map[string][]catalog.UpstreamTool
	asked []string
}

func (l *listed) ListTools(s *catalog.MCPServer) ([]catalog.UpstreamTool, error) {
	l.asked = append(l.asked, s.Name)
	tools, ok := l.tools[s.Name]
	if !ok {
		return nil, errors.New("connection refused")
	}
	return tools, nil
}

var payTools = []catalog.UpstreamTool{
	{Name: "CreatePayment", Description: "Create a payment.", InputSchema: map[string]any{"type": "object",
		"properties": map[string]any{"amount": map[string]any{"type": "integer"}}, "required": []any{"amount"}}},
	{Name: "get_payment", Title: "Get a payment", InputSchema: map[string]any{"properties": map[string]any{"id": map[string]any{"type": "string"}}},
		Annotations: map[string]any{"readOnlyHint": true}},
	{Name: "update_payment", Description: "Replace a payment's note.", InputSchema: map[string]any{"type": "object"},
		Annotations: map[string]any{"idempotentHint": true}},
	{Name: "find_payment", Description: "Find by reference.", InputSchema: map[string]any{"type": "object"},
		Annotations: map[string]any{"readOnlyHint": true}},
}

// TestMCPServerToolsFromTheUpstream: without a tools list every upstream tool becomes a tool:
// named <server>.<upstream> (lower-cased), described, checked and effected as the upstream
// says (readOnlyHint → read, idempotentHint → idempotent, else write).
func TestMCPServerToolsFromTheUpstream(t *testing.T) {
	l := &listed{tools: map[string][]catalog.UpstreamTool{"pay": payTools}}
	c, err := catalog.LoadWith([]byte("mcp_servers:\n  - name: pay\n    command: [pay-server, --stdio]\n"), catalog.Options{MCP: l})
	require.NoError(t, err)
	assert.Equal(t, []string{"pay.createpayment", "pay.get_payment", "pay.update_payment", "pay.find_payment"}, c.Names())
	create, _ := c.Get("pay.createpayment")
	assert.Equal(t, catalog.EffectWrite, create.Effect)
	assert.Equal(t, "Create a payment.", create.Description)
	assert.Equal(t, "CreatePayment", create.MCP.Upstream)
	assert.False(t, create.RetrySafe(), "a write without key support")
	assert.NotEmpty(t, create.ValidateParams(map[string]any{"amount": "ten"}), "the upstream's inputSchema checks the params")
	get, _ := c.Get("pay.get_payment")
	assert.Equal(t, catalog.EffectRead, get.Effect)
	assert.Equal(t, "Get a payment", get.Description, "the title when there is no description")
	upd, _ := c.Get("pay.update_payment")
	assert.Equal(t, catalog.EffectIdempotent, upd.Effect)
	assert.Equal(t, catalog.DefaultTimeout, create.HTTP.Timeout, "the server's per-call timeout")
	require.Len(t, c.MCPServers(), 1)
	assert.Equal(t, []string{"pay-server", "--stdio"}, c.MCPServers()[0].Command)
}

// TestMCPServerToolOverrides: a tools entry names the upstream tool and may rename it, take
// another effect, declare key support, a reconcile tool and every other field of a tool.
func TestMCPServerToolOverrides(t *testing.T) {
	l := &listed{tools: map[string][]catalog.UpstreamTool{"pay": payTools}}
	c, err := catalog.LoadWith([]byte(`
mcp_servers:
  - name: pay
    url: https://mcp.example.test/mcp
    timeout: 3s
    tools:
      - upstream: CreatePayment
        name: payments.create
        idempotency_argument: idempotency_key
        honours_key: true
        sensitive_params: [card]
        params_schema:
          type: object
          properties: {amount: {type: integer}, card: {type: string}}
        review: {require_approval: true}
        reconcile:
          tool: find_payment
          arguments: {reference: "{{.DownstreamKey}}", tenant: "{{.Tenant}}"}
          found: /payments/0
          settle: 2s
`), catalog.Options{MCP: l})
	require.NoError(t, err)
	assert.Equal(t, []string{"payments.create"}, c.Names(), "only the tools listed")
	p, _ := c.Get("payments.create")
	assert.True(t, p.RetrySafe(), "honours_key")
	assert.Equal(t, "idempotency_key", p.MCP.IdempotencyArgument)
	assert.Equal(t, []string{"/card"}, p.SensitiveParams)
	assert.True(t, p.Review.RequireApproval)
	assert.Equal(t, "3s", p.HTTP.Timeout.String())
	require.NotNil(t, p.Reconcile)
	assert.Equal(t, "/payments/0", p.Reconcile.Found)
	args, err := p.RenderReconcileArguments(catalog.TemplateData{DownstreamKey: "dk_1", Tenant: "acme"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"reference": "dk_1", "tenant": "acme"}, args)
	assert.Empty(t, p.ValidateParams(map[string]any{"amount": 1, "card": "4242"}), "the file's params_schema, not the upstream's")
}

// TestMCPServerProblems: every problem of an entry is named at load, and a server is asked
// only once the file is sound.
func TestMCPServerProblems(t *testing.T) {
	cases := map[string]struct{ file, want string }{
		"unlisted tool": {"mcp_servers:\n  - name: pay\n    command: [x]\n    tools: [{upstream: refund}]\n",
			`mcp server "pay": tools[0].upstream: the server lists no tool "refund"`},
		"both transports": {"mcp_servers:\n  - name: pay\n    command: [x]\n    url: https://a.test/mcp\n", "not both"},
		"neither":         {"mcp_servers:\n  - name: pay\n", "required: command (stdio) or url"},
		"bad name":        {"mcp_servers:\n  - name: Pay!\n    command: [x]\n", "invalid name"},
		"tenant env": {"mcp_servers:\n  - name: pay\n    command: [x]\n    env: {TOKEN: {tenant: pay_token}}\n",
			"env.TOKEN: {tenant: …} secrets are per operation"},
		"no found": {"mcp_servers:\n  - name: pay\n    command: [x]\n    tools:\n      - upstream: CreatePayment\n        reconcile: {tool: find_payment}\n",
			"reconcile.found: required"},
		"unreachable": {"mcp_servers:\n  - name: gone\n    command: [x]\n", `mcp server "gone": listing its tools: connection refused`},
		"unknown field": {"mcp_servers:\n  - name: pay\n    command: [x]\n    tools: [{upstream: CreatePayment, colour: red}]\n",
			"tools[0].colour"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := &listed{tools: map[string][]catalog.UpstreamTool{"pay": payTools}}
			_, err := catalog.LoadWith([]byte(tc.file), catalog.Options{MCP: l})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	t.Run("a broken file starts nothing", func(t *testing.T) {
		l := &listed{tools: map[string][]catalog.UpstreamTool{"pay": payTools}}
		_, err := catalog.LoadWith([]byte("tools: []\nmcp_servers:\n  - name: pay\n    command: [x]\n    timeout: forever\n"), catalog.Options{MCP: l})
		require.Error(t, err)
		assert.Empty(t, l.asked)
	})
	t.Run("no lister", func(t *testing.T) {
		_, err := catalog.Load([]byte("mcp_servers:\n  - name: pay\n    command: [x]\n"))
		require.ErrorContains(t, err, "cannot start MCP servers")
	})
}

// TestMCPServerOlderDraftSchema: an upstream inputSchema that declares draft-07 with $schema is
// validated as draft-07 (its array form of items is a tuple), not refused as bad 2020-12.
func TestMCPServerOlderDraftSchema(t *testing.T) {
	l := &listed{tools: map[string][]catalog.UpstreamTool{"old": {{Name: "pair", Description: "A pair.", InputSchema: map[string]any{
		"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
		"properties": map[string]any{"pair": map[string]any{"type": "array", "items": []any{map[string]any{"type": "string"}}}},
	}}}}}
	c, err := catalog.LoadWith([]byte("mcp_servers:\n  - name: old\n    command: [x]\n"), catalog.Options{MCP: l})
	require.NoError(t, err)
	tool, _ := c.Get("old.pair")
	assert.Empty(t, tool.ValidateParams(map[string]any{"pair": []any{"a", 1}}), "a tuple: only the first item is a string")
	assert.NotEmpty(t, tool.ValidateParams(map[string]any{"pair": []any{1}}))
}

// TestMCPIdempotencyArgumentLeavesTheSchema: the argument the gateway fills with the downstream
// key is not asked of agents, even where the upstream requires it (Square's tools do), and an
// agent may not set it.
func TestMCPIdempotencyArgumentLeavesTheSchema(t *testing.T) {
	l := &listed{tools: map[string][]catalog.UpstreamTool{"sq": {{Name: "CreatePayment", Description: "Pay.", InputSchema: map[string]any{
		"type": "object", "required": []any{"amount", "idempotency_key"},
		"properties": map[string]any{"amount": map[string]any{"type": "integer"}, "idempotency_key": map[string]any{"type": "string"}},
	}}}}}
	c, err := catalog.LoadWith([]byte("mcp_servers:\n  - name: sq\n    command: [x]\n    tools:\n      - upstream: CreatePayment\n        idempotency_argument: idempotency_key\n"), catalog.Options{MCP: l})
	require.NoError(t, err)
	tool, _ := c.Get("sq.createpayment")
	assert.Empty(t, tool.ValidateParams(map[string]any{"amount": 1}))
	assert.NotContains(t, tool.ParamsSchemaRaw["properties"], "idempotency_key")
	assert.Equal(t, []any{"amount"}, tool.ParamsSchemaRaw["required"])
	assert.Equal(t, []string{"/idempotency_key"}, tool.KeyParams())
	assert.Contains(t, l.tools["sq"][0].InputSchema["required"], "idempotency_key", "the upstream's schema is not changed")
}

// TestMCPServerBounds: what a server lists and what its env holds are bounded as docs/MCP.md
// says: a huge description or schema stops the gateway naming the tool, unless the file gives
// its own; a literal credential in env is refused (a reference is masked where the server
// echoes it, a literal could not be); max_result_bytes has a default and a range.
func TestMCPServerBounds(t *testing.T) {
	huge := strings.Repeat("d", catalog.MaxUpstreamDescription+1)
	bigSchema := map[string]any{"type": "object", "description": strings.Repeat("s", catalog.MaxUpstreamSchema)}
	upstream := []catalog.UpstreamTool{
		{Name: "wordy", Description: huge, InputSchema: map[string]any{"type": "object"}},
		{Name: "schemaful", Description: "ok", InputSchema: bigSchema},
		{Name: "outputful", Description: "ok", InputSchema: map[string]any{"type": "object"}, OutputSchema: bigSchema},
		{Name: "plain", Description: "ok", InputSchema: map[string]any{"type": "object"}},
	}
	load := func(file string) (*catalog.Catalog, error) {
		return catalog.LoadWith([]byte(file), catalog.Options{MCP: &listed{tools: map[string][]catalog.UpstreamTool{"big": upstream}},
			Getenv: func(string) string { return "set" }})
	}
	refused := map[string]struct{ file, want string }{
		"huge description": {"mcp_servers:\n  - name: big\n    command: [x]\n    tools: [{upstream: wordy}]\n",
			`mcp server "big": tool "wordy": tools/list gives a description of 16385 bytes`},
		"huge inputSchema": {"mcp_servers:\n  - name: big\n    command: [x]\n    tools: [{upstream: schemaful}]\n",
			`tool "schemaful": tools/list gives an inputSchema of`},
		"huge outputSchema": {"mcp_servers:\n  - name: big\n    command: [x]\n    tools: [{upstream: outputful}]\n",
			`tool "outputful": tools/list gives an outputSchema of`},
		"all tools, one huge": {"mcp_servers:\n  - name: big\n    command: [x]\n", `tool "wordy"`},
		"literal API key": {"mcp_servers:\n  - name: big\n    command: [x]\n    env: {BRAVE_API_KEY: BSAx123}\n",
			"env.BRAVE_API_KEY: a credential must be a secret reference"},
		"literal token": {"mcp_servers:\n  - name: big\n    command: [x]\n    env: {GITHUB_PERSONAL_ACCESS_TOKEN: ghp_x}\n",
			"env.GITHUB_PERSONAL_ACCESS_TOKEN: a credential must be a secret reference"},
		"literal password":       {"mcp_servers:\n  - name: big\n    command: [x]\n    env: {PGPASSWORD: hunter2}\n", "env.PGPASSWORD"},
		"result bound too small": {"mcp_servers:\n  - name: big\n    command: [x]\n    max_result_bytes: 10\n", "max_result_bytes: 10 out of range"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := load(tc.file)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	t.Run("the file's own description and schema", func(t *testing.T) {
		c, err := load("mcp_servers:\n  - name: big\n    command: [x]\n    env: {MEMORY_FILE_PATH: /var/lib/m.jsonl, API_KEY: {env: K}}\n" +
			"    tools:\n      - {upstream: wordy, description: Short.}\n      - {upstream: schemaful, params_schema: {type: object}}\n      - {upstream: plain}\n")
		require.NoError(t, err)
		tool, ok := c.Get("big.wordy")
		require.True(t, ok)
		assert.Equal(t, "Short.", tool.Description)
		assert.Equal(t, catalog.DefaultMaxResultBytes, c.MCPServers()[0].MaxResultBytes)
	})
}

// TestMCPEffectFromAnnotationsIsMarked: a tool the gateway retries only because its server's
// annotations say so is marked, for the start-up warning; one whose file sets the effect, or
// that annotations leave a write, is not.
func TestMCPEffectFromAnnotationsIsMarked(t *testing.T) {
	l := &listed{tools: map[string][]catalog.UpstreamTool{"pay": payTools}}
	c, err := catalog.LoadWith([]byte("mcp_servers:\n  - name: pay\n    command: [x]\n    tools:\n"+
		"      - {upstream: CreatePayment}\n      - {upstream: get_payment}\n      - {upstream: update_payment}\n"+
		"      - {upstream: find_payment, effect: read}\n"), catalog.Options{MCP: l})
	require.NoError(t, err)
	marked := map[string]bool{}
	for _, tool := range c.Tools() {
		marked[tool.Name] = tool.MCP.EffectFromAnnotations
	}
	assert.Equal(t, map[string]bool{"pay.createpayment": false, "pay.get_payment": true, "pay.update_payment": true, "pay.find_payment": false}, marked)
}
