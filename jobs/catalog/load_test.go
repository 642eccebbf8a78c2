package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// baseTool is a valid tool with every section; cases change one field of it.
func baseTool() map[string]any {
	return map[string]any{
		"name":        "tickets.create",
		"description": "Create a support ticket",
		"effect":      "write",
		"params_schema": map[string]any{
			"type":     "object",
			"required": []any{"subject"},
			"properties": map[string]any{
				"subject":     map[string]any{"type": "string", "maxLength": 200},
				"card_number": map[string]any{"type": "string"},
			},
		},
		"sensitive_params": []any{"card_number"},
		"http": map[string]any{
			"method":             "POST",
			"url":                "http://127.0.0.1:9100/tickets",
			"timeout":            "2s",
			"idempotency_header": "Idempotency-Key",
			"result_reference":   "/id",
		},
		"reconcile": map[string]any{
			"method": "GET",
			"url":    "http://127.0.0.1:9100/tickets?reference={{.OperationID}}",
			"settle": "2s",
		},
		"retry":  map[string]any{"max_attempts": 4, "initial_backoff": "100ms", "max_backoff": "5s", "unsent_for": "90s"},
		"review": map[string]any{"require_approval": false, "approvals": 1, "approval_ttl": "24h", "escalate_after": "1m"},
		"compensation": map[string]any{
			"tool":   "tickets.close",
			"params": map[string]any{"ticket_id": "{{.Result.id}}", "reason": "compensation for {{.OperationID}}"},
		},
		"retention": "24h",
	}
}

func closeTool() map[string]any {
	return map[string]any{
		"name":          "tickets.close",
		"description":   "Close a ticket",
		"effect":        "idempotent",
		"params_schema": map[string]any{"type": "object"},
		"http":          map[string]any{"url": "http://127.0.0.1:9100/tickets/{{.Params.ticket_id}}/close"},
	}
}

func fileOf(t *testing.T, tools ...map[string]any) []byte {
	t.Helper()
	list := make([]any, len(tools))
	for i, tool := range tools {
		list[i] = tool
	}
	b, err := yaml.Marshal(map[string]any{"tools": list})
	require.NoError(t, err)
	return b
}

// set changes (or with value nil deletes) the field at a dotted path of a tool.
func set(tool map[string]any, path string, value any) {
	keys := strings.Split(path, ".")
	m := tool
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	if value == nil {
		delete(m, keys[len(keys)-1])
	} else {
		m[keys[len(keys)-1]] = value
	}
}

func TestLoadRejectsInvalidFields(t *testing.T) {
	t.Parallel()
	const tool = `tools file: tool "tickets.create": `
	tests := []struct {
		name  string
		path  string
		value any // nil deletes the field
		want  string
	}{
		{"name missing", "name", nil, `tools file: tool #1 (line 2): name: required`},
		{"name with capitals", "name", "Tickets.Create", `tools file: tool #1 (line 2): name: invalid name "Tickets.Create"`},
		{"name too long", "name", strings.Repeat("a", 65), `tools file: tool #1 (line 2): name: invalid name`},
		{"name starting with a dot", "name", ".tickets", `tools file: tool #1 (line 2): name: invalid name ".tickets"`},
		{"description missing", "description", nil, tool + `description: required`},
		{"description blank", "description", "   ", tool + `description: required`},
		{"effect missing", "effect", nil, tool + `effect: required`},
		{"effect unknown", "effect", "delete", tool + `effect: invalid effect "delete"`},
		{"schema missing", "params_schema", nil, tool + `params_schema: required`},
		{"schema not a mapping", "params_schema", "object", tool + `params_schema: expected a mapping`},
		{"schema not an object", "params_schema", map[string]any{"type": "array"}, tool + `params_schema: the top level must be "type: object"`},
		{"schema without type", "params_schema", map[string]any{"properties": map[string]any{}}, tool + `params_schema: the top level must be "type: object"`},
		{"schema keyword of wrong type", "params_schema.properties.subject.maxLength", "long", tool + `params_schema: invalid schema: at "/properties/subject/maxLength": got string, want integer`},
		{"schema bad regexp", "params_schema.properties.subject.pattern", "(", tool + `params_schema: invalid schema:`},
		{"schema external ref", "params_schema.properties.subject", map[string]any{"$ref": "file:///etc/passwd"}, tool + `params_schema: invalid schema: failing loading "file:///etc/passwd": external schema`},
		{"schema dangling ref", "params_schema.properties.subject", map[string]any{"$ref": "#/$defs/nope"}, tool + `params_schema: invalid schema:`},
		{"schema infinite number", "params_schema.properties.subject.maximum", yamlRaw(".inf"), tool + `params_schema: not representable as JSON`},
		{"schema unknown keyword", "params_schema.properties.subject.maxlength", 10, tool + `params_schema: at "/properties/subject": unknown keyword "maxlength": JSON Schema 2020-12 has no such keyword`},
		{"schema keyword of an older draft", "params_schema.dependencies", map[string]any{"subject": []any{"card_number"}}, tool + `params_schema: at "/": unknown keyword "dependencies"`},
		{"schema extension keyword", "params_schema.x-internal", true, tool + `params_schema: at "/": unknown keyword "x-internal"`},
		{"param named operation_key", "params_schema.properties.operation_key", map[string]any{"type": "string"}, tool + `params_schema.properties.operation_key: "operation_key" is reserved: MCP clients pass the operation key in it`},
		{"operation_key required", "params_schema.required", []any{"subject", "operation_key"}, tool + `params_schema.required: "operation_key" is reserved`},
		{"sensitive param in the url path", "http.url", "http://127.0.0.1:9100/cards/{{.Params.card_number}}/refund", tool + `http.url: {{.Params.card_number}} would put the sensitive param /card_number into the URL; send it in the body instead`},
		{"sensitive param in the reconcile query", "reconcile.url", "http://127.0.0.1:9100/tickets?card={{.Params.card_number}}", tool + `reconcile.url: {{.Params.card_number}} would put the sensitive param /card_number into the URL`},
		{"sensitive bad escape", "sensitive_params", []any{"card_number", "/a~2b"}, tool + `sensitive_params[1]: invalid JSON pointer "/a~2b"`},
		{"sensitive empty", "sensitive_params", []any{""}, tool + `sensitive_params[0]: empty entry`},
		{"http missing", "http", nil, tool + `http: required`},
		{"method unknown", "http.method", "FETCH", tool + `http.method: invalid method "FETCH"`},
		{"method lower case", "http.method", "post", tool + `http.method: invalid method "post"`},
		{"url missing", "http.url", nil, tool + `http.url: required`},
		{"url relative", "http.url", "/tickets", tool + `http.url: invalid URL "/tickets": want an absolute http or https URL`},
		{"url not http", "http.url", "ftp://files.example/x", tool + `http.url: invalid URL "ftp://files.example/x": want an absolute http or https URL`},
		{"url with credentials", "http.url", "http://user:pw@example.com/x", tool + `http.url: invalid URL "http://user:pw@example.com/x": credentials`},
		{"url host from params", "http.url", "http://{{.Params.host}}/tickets", tool + `http.url: invalid URL "http://{{.Params.host}}/tickets": the scheme and host must be literal`},
		{"url host part from tenant", "http.url", "https://{{.Tenant}}.example.com/x", tool + `http.url: invalid URL "https://{{.Tenant}}.example.com/x": the scheme and host must be literal`},
		{"url port from params", "http.url", "http://example.com:{{.Params.port}}/x", tool + `http.url: invalid URL`},
		{"url scheme from params", "http.url", "{{.Params.u}}", tool + `http.url: invalid URL "{{.Params.u}}": the scheme and host must be literal`},
		{"url refers to result", "http.url", "http://example.com/{{.Result.id}}", tool + `http.url: invalid template "http://example.com/{{.Result.id}}": {{.Result.id}}: unknown field .Result`},
		{"url unknown field", "http.url", "http://example.com/{{.Foo}}", tool + `http.url: invalid template "http://example.com/{{.Foo}}": {{.Foo}}: unknown field .Foo`},
		{"url params without name", "http.url", "http://example.com/{{.Params}}", tool + `http.url: invalid template "http://example.com/{{.Params}}": {{.Params}}: name the field`},
		{"url field of a string", "http.url", "http://example.com/{{.Key.x}}", tool + `http.url: invalid template "http://example.com/{{.Key.x}}": {{.Key.x}}: .Key has no fields`},
		{"url function call", "http.url", `http://example.com/{{printf "%s" .Key}}`, tool + `http.url: invalid template "http://example.com/{{printf \"%s\" .Key}}": {{printf "%s" .Key}} is not allowed`},
		{"url conditional", "http.url", `http://example.com/{{if .Key}}x{{end}}`, tool + `http.url: invalid template "http://example.com/{{if .Key}}x{{end}}": {{if .Key}}x{{end}} is not allowed`},
		{"url unclosed action", "http.url", "http://example.com/{{.Key", tool + `http.url: invalid template "http://example.com/{{.Key":`},
		{"url dot segment", "http.url", "http://example.com/a/../admin", tool + `http.url: invalid URL "http://example.com/a/../admin": a URL path segment is "." or ".."`},
		{"timeout not a duration", "http.timeout", "2x", tool + `http.timeout: invalid duration "2x"`},
		{"timeout without unit", "http.timeout", 2, tool + `http.timeout: invalid duration "2"`},
		{"timeout zero", "http.timeout", "0s", tool + `http.timeout: invalid duration "0s": must be more than 0 and at most 5m0s`},
		{"timeout too long", "http.timeout", "6m", tool + `http.timeout: invalid duration "6m": must be more than 0 and at most 5m0s`},
		{"key header not a token", "http.idempotency_header", "Idempotency Key", tool + `http.idempotency_header: invalid header name "Idempotency Key"`},
		{"key header reserved", "http.idempotency_header", "x-request-id", tool + `http.idempotency_header: "x-request-id" is set by idemgate itself`},
		{"result reference not a pointer", "http.result_reference", "id", tool + `http.result_reference: invalid JSON pointer "id"`},
		{"reconcile url missing", "reconcile.url", nil, tool + `reconcile.url: required`},
		{"reconcile url host template", "reconcile.url", "http://{{.Key}}/x", tool + `reconcile.url: invalid URL "http://{{.Key}}/x": the scheme and host must be literal`},
		{"reconcile method", "reconcile.method", "DELETE", tool + `reconcile.method: invalid method "DELETE": want one of GET, POST`},
		{"reconcile settle negative", "reconcile.settle", "-1s", tool + `reconcile.settle: invalid duration "-1s": must not be negative`},
		{"retry attempts zero", "retry.max_attempts", 0, tool + `retry.max_attempts: 0 out of range 1..100`},
		{"retry attempts too many", "retry.max_attempts", 101, tool + `retry.max_attempts: 101 out of range 1..100`},
		{"retry attempts not a number", "retry.max_attempts", "three", tool + `retry.max_attempts: expected an integer, got "three"`},
		{"retry initial zero", "retry.initial_backoff", "0s", tool + `retry.initial_backoff: invalid duration "0s": must be more than 0`},
		{"retry max bad", "retry.max_backoff", "soon", tool + `retry.max_backoff: invalid duration "soon"`},
		{"retry unsent_for bad", "retry.unsent_for", "soon", tool + `retry.unsent_for: invalid duration "soon"`},
		{"retry initial above max", "retry.initial_backoff", "10s", tool + `retry.initial_backoff: 10s is more than max_backoff 5s`},
		{"review approvals zero", "review.approvals", 0, tool + `review.approvals: 0 out of range 1..10`},
		{"review approvals eleven", "review.approvals", 11, tool + `review.approvals: 11 out of range 1..10`},
		{"review approval not a bool", "review.require_approval", "maybe", tool + `review.require_approval: expected a boolean, got "maybe"`},
		{"review ttl zero", "review.approval_ttl", "0s", tool + `review.approval_ttl: invalid duration "0s": must be more than 0`},
		{"review escalate negative", "review.escalate_after", "-1m", tool + `review.escalate_after: invalid duration "-1m": must not be negative`},
		{"compensation tool missing", "compensation.tool", nil, tool + `compensation.tool: required`},
		{"compensation tool unknown", "compensation.tool", "tickets.delete", tool + `compensation.tool: unknown tool "tickets.delete"`},
		{"compensation tool itself", "compensation.tool", "tickets.create", tool + `compensation.tool: a tool cannot compensate itself`},
		{"compensation params a list", "compensation.params", []any{"x"}, tool + `compensation.params: expected a mapping`},
		{"compensation template field", "compensation.params.reason", "{{.Foo}}", tool + `compensation.params.reason: invalid template "{{.Foo}}": {{.Foo}}: unknown field .Foo`},
		{"compensation nested template", "compensation.params.meta", map[string]any{"tags": []any{"ok", "{{.Result}}"}}, tool + `compensation.params.meta.tags[1]: invalid template "{{.Result}}": {{.Result}}: name the field`},
		{"retention zero", "retention", "0s", tool + `retention: invalid duration "0s": must be more than 0`},
		{"retention bad", "retention", "30d", tool + `retention: invalid duration "30d"`},
		{"unknown field", "colour", "blue", tool + `colour: unknown field (line `},
		{"unknown nested field", "http.verb", "POST", tool + `http.verb: unknown field (line `},
		{"http not a mapping", "http", "http://example.com", tool + `http: expected a mapping, got "http://example.com"`},
		{"sensitive not a list", "sensitive_params", "card_number", tool + `sensitive_params: expected a list, got "card_number"`},
		{"url a list", "http.url", []any{"a"}, tool + `http.url: expected a string, got a list`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tl := baseTool()
			set(tl, tc.path, tc.value)
			c, err := Load(fileOf(t, tl, closeTool()))
			require.Error(t, err)
			assert.Nil(t, c)
			assert.True(t, strings.HasPrefix(err.Error(), tc.want), "error %q\nwant prefix %q", err, tc.want)
			var fe *FileError
			require.ErrorAs(t, err, &fe)
		})
	}
}

// yamlRaw is a YAML node written as is, for values Go cannot spell in a map (".inf").
func yamlRaw(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Value: s, Tag: "!!float"}
}

func TestLoadRejectsInvalidFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		want string
	}{
		{"empty", "", "tools file: empty file"},
		{"only a comment", "# no tools yet\n", "tools file: empty file"},
		{"not YAML", "tools: [", "tools file: invalid YAML"},
		{"not a mapping", "- a", "tools file: expected a mapping with a tools list"},
		{"no tools", "other: 1", `tools file: other: unknown field (line 1)`},
		{"tools missing", "tools:", "tools file: tools: required"},
		{"tools empty", "tools: []", "tools file: tools: no tools declared"},
		{"tools not a list", "tools: {a: 1}", "tools file: tools: expected a list, got a mapping"},
		{"two documents", "tools: []\n---\ntools: []", "tools file: more than one YAML document"},
		{"tool not a mapping", "tools:\n  - tickets.create", `tools file: tool #1 (line 2): expected a mapping, got "tickets.create"`},
		{"merge key", "tools:\n  - <<: {name: a}\n    name: b", `tools file: tool "b": <<: merge keys (<<) are not supported`},
		{"duplicate key", "tools:\n  - name: a\n    name: b", `tools file: tool "a": name: declared twice (line 3)`},
		{"duplicate nested key", "tools:\n  - name: a\n    http: {url: x, url: y}", `tools file: tool "a": http.url: declared twice (line 3)`},
		{"duplicate tools", "tools: []\ntools: []", `tools file: tools: declared twice (line 2)`},
		{"duplicate schema key", "tools:\n  - name: a\n    params_schema: {type: object, type: string}", `tools file: tool "a": params_schema: line 3: mapping key "type" already defined at line 3`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load([]byte(tc.file))
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), tc.want), "error %q\nwant prefix %q", err, tc.want)
		})
	}
}

func TestLoadRejectsDuplicateNames(t *testing.T) {
	t.Parallel()
	t.Run("same name", func(t *testing.T) {
		t.Parallel()
		_, err := Load(fileOf(t, closeTool(), closeTool()))
		require.EqualError(t, err, `tools file: tool "tickets.close": name: declared twice (first as tool #1)`)
	})
	t.Run("same once dots are written __", func(t *testing.T) {
		t.Parallel()
		other := closeTool()
		other["name"] = "tickets__close"
		_, err := Load(fileOf(t, closeTool(), other))
		require.EqualError(t, err, `tools file: tool "tickets__close": name: clashes with tool "tickets.close" once each "." is written "__"`)
	})
}

func TestLoadReportsEveryProblem(t *testing.T) {
	t.Parallel()
	a := baseTool()
	set(a, "http.timeout", "2x")
	set(a, "retry.max_attempts", 0)
	b := closeTool()
	set(b, "effect", "maybe")
	_, err := Load(fileOf(t, a, b))
	require.Error(t, err)
	assert.Equal(t, strings.Join([]string{
		`tools file: tool "tickets.create": http.timeout: invalid duration "2x"`,
		`tools file: tool "tickets.create": retry.max_attempts: 0 out of range 1..100`,
		`tools file: tool "tickets.close": effect: invalid effect "maybe": want read, idempotent or write`,
	}, "\n"), err.Error())
	var fe *FileError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "tickets.create", fe.Tool)
	assert.Equal(t, "http.timeout", fe.Field)
}

func TestLoadAppliesDefaults(t *testing.T) {
	t.Parallel()
	c, err := Load([]byte(`
tools:
  - name: thing.get
    description: "  Read a thing  "
    effect: read
    params_schema: {type: object}
    http:
      url: http://127.0.0.1:9100/things
    reconcile:
      url: http://127.0.0.1:9100/things
`))
	require.NoError(t, err)
	tl, ok := c.Get("thing.get")
	require.True(t, ok)
	assert.Equal(t, "Read a thing", tl.Description)
	assert.Equal(t, HTTPSpec{Method: "POST", URL: "http://127.0.0.1:9100/things", Timeout: 10 * time.Second}, tl.HTTP)
	assert.Equal(t, &ReconcileSpec{Method: "GET", URL: "http://127.0.0.1:9100/things", Settle: 0}, tl.Reconcile)
	assert.Equal(t, RetryPolicy{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, UnsentFor: DefaultUnsentFor}, tl.Retry)
	assert.Equal(t, ReviewPolicy{RequireApproval: false, Approvals: 1, ApprovalTTL: 24 * time.Hour, EscalateAfter: time.Minute,
		LookalikeWindow: 24 * time.Hour}, tl.Review)
	assert.Equal(t, 720*time.Hour, tl.Retention)
	assert.Nil(t, tl.Compensation)
	assert.Empty(t, tl.SensitiveParams)
	assert.True(t, tl.RetrySafe())
}

func TestLoadKeepsDeclaredValues(t *testing.T) {
	t.Parallel()
	tl := baseTool()
	set(tl, "sensitive_params", []any{"card_number", "/card/number", "a/b", "/card_number"})
	c, err := Load(fileOf(t, tl, closeTool()))
	require.NoError(t, err)
	got, ok := c.Get("tickets.create")
	require.True(t, ok)
	assert.Equal(t, EffectWrite, got.Effect)
	assert.Equal(t, []string{"/card_number", "/card/number", "/a~1b"}, got.SensitiveParams, "names become pointers, duplicates go")
	assert.Equal(t, HTTPSpec{Method: "POST", URL: "http://127.0.0.1:9100/tickets", Timeout: 2 * time.Second,
		IdempotencyHeader: "Idempotency-Key", ResultReference: "/id"}, got.HTTP)
	assert.Equal(t, RetryPolicy{MaxAttempts: 4, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, UnsentFor: 90 * time.Second}, got.Retry)
	assert.Equal(t, 2*time.Second, got.Reconcile.Settle)
	assert.Equal(t, 24*time.Hour, got.Retention)
	assert.Equal(t, "tickets.close", got.Compensation.Tool)
	assert.Equal(t, "object", got.ParamsSchemaRaw["type"])
	assert.NotNil(t, got.Schema)
	assert.True(t, got.RetrySafe(), "the downstream honours keys")
}

func TestLoadAcceptsAnchorsAndUnderscoreCompensationTarget(t *testing.T) {
	t.Parallel()
	c, err := Load([]byte(`
tools:
  - name: a.one
    description: One
    effect: write
    params_schema: {type: object}
    http: {url: "http://127.0.0.1:9100/one"}
    retry: &fast {max_attempts: 7, initial_backoff: 10ms, max_backoff: 1s}
    compensation: {tool: a__two}
  - name: a.two
    description: Two
    effect: idempotent
    params_schema: {type: object, $defs: {id: {type: string}}, properties: {id: {$ref: "#/$defs/id"}}}
    http: {url: "http://127.0.0.1:9100/two"}
    retry: *fast
`))
	require.NoError(t, err)
	one, _ := c.Get("a.one")
	two, _ := c.Get("a.two")
	assert.Equal(t, "a.two", one.Compensation.Tool, "stored with dots")
	assert.Equal(t, map[string]any{}, one.Compensation.Params)
	assert.Equal(t, 7, two.Retry.MaxAttempts)
	assert.Equal(t, []ParamError{{Pointer: "/id", Message: "got number, want string"}}, two.ValidateParams(map[string]any{"id": 1}))
}

func TestCatalogLookup(t *testing.T) {
	t.Parallel()
	c, err := Load(fileOf(t, baseTool(), closeTool()))
	require.NoError(t, err)

	for _, name := range []string{"tickets.create", "tickets__create"} {
		tl, ok := c.Get(name)
		require.True(t, ok, name)
		assert.Equal(t, "tickets.create", tl.Name)
		assert.Equal(t, "tickets__create", tl.FunctionName())
	}
	for _, name := range []string{"", "tickets", "tickets_create", "tickets.create ", "TICKETS.CREATE"} {
		_, ok := c.Get(name)
		assert.False(t, ok, name)
	}
	assert.Equal(t, []string{"tickets.create", "tickets.close"}, c.Names())

	tools := c.Tools()
	require.Len(t, tools, 2)
	tools[0] = nil
	assert.NotNil(t, c.Tools()[0], "Tools returns a copy")

	var nilCatalog *Catalog
	_, ok := nilCatalog.Get("x")
	assert.False(t, ok)
	assert.Empty(t, nilCatalog.Tools())
}

func TestLoadFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tools.yaml")
	require.NoError(t, os.WriteFile(path, fileOf(t, closeTool()), 0o600))
	c, err := LoadFile(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"tickets.close"}, c.Names())

	_, err = LoadFile(filepath.Join(t.TempDir(), "missing.yaml"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, os.ErrNotExist))
	assert.Contains(t, err.Error(), "tools file: ")
}

// TestLoadRefusesServingHazards: what issue 14 item 4 and issue 20 refuse at load, written as
// an operator would write it.
func TestLoadRefusesServingHazards(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ yaml, want string }{
		"an unquoted description with a comma in a flow mapping": {`
tools:
  - name: refunds.issue
    description: Refund
    effect: write
    params_schema:
      type: object
      properties:
        currency: {type: string, description: ISO 4217 code, e.g. EUR}
    http: {url: "http://127.0.0.1:9/refunds"}
`, `tools file: tool "refunds.issue": params_schema: at "/properties/currency": unknown keyword "e.g. EUR": ` +
			`JSON Schema 2020-12 has no such keyword (in a YAML flow mapping {...} a ", " splits a value into a new key: quote the value)`},
		"a param holding a sensitive member templated into the URL": {`
tools:
  - name: cards.check
    description: Check a card
    effect: read
    params_schema: {type: object, properties: {card: {type: object}}}
    sensitive_params: [/card/number]
    http: {method: GET, url: "http://127.0.0.1:9/cards/{{.Params.card.number}}"}
`, `tools file: tool "cards.check": http.url: {{.Params.card.number}} would put the sensitive param /card/number into the URL`},
		"a GET with a sensitive param": {`
tools:
  - name: cards.lookup
    description: Look a card up
    effect: read
    params_schema: {type: object, properties: {pan: {type: string}}}
    sensitive_params: [pan]
    http: {method: GET, url: "http://127.0.0.1:9/cards"}
`, `tools file: tool "cards.lookup": sensitive_params: a GET sends its params in the URL`},
		"a sensitive param templated into a reconcile URL": {`
tools:
  - name: cards.charge
    description: Charge a card
    effect: write
    params_schema: {type: object, properties: {pan: {type: string}}}
    sensitive_params: [pan]
    http: {url: "http://127.0.0.1:9/charges"}
    reconcile: {url: "http://127.0.0.1:9/charges?pan={{.Params.pan}}"}
`, `tools file: tool "cards.charge": reconcile.url: {{.Params.pan}} would put the sensitive param /pan into the URL`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Load([]byte(tc.yaml))
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), tc.want), "error %q\nwant prefix %q", err, tc.want)
		})
	}
}

// TestLoadKeywordsOnlyInSchemas: names of properties and data (enum, const, default,
// examples) are not keywords; a sensitive param outside every URL is fine.
func TestLoadKeywordsOnlyInSchemas(t *testing.T) {
	t.Parallel()
	_, err := Load([]byte(`
tools:
  - name: things.make
    description: Make a thing
    effect: write
    params_schema:
      type: object
      $defs: {code: {type: string, x: 1}}
      properties:
        "e.g. EUR": {type: string}
        items: {type: array, items: {type: object, properties: {colour: {type: string}}}}
        shape: {enum: [{sides: 3}], default: {sides: 3}, examples: [{anything: goes}], const: {sides: 3}}
        secret: {type: string}
    sensitive_params: [secret]
    http: {url: "http://127.0.0.1:9/things/{{.Params.shape}}"}
`))
	require.Error(t, err, "$defs are schemas too")
	assert.Contains(t, err.Error(), `at "/$defs/code": unknown keyword "x"`)

	_, err = Load([]byte(`
tools:
  - name: things.make
    description: Make a thing
    effect: write
    params_schema:
      type: object
      $defs: {code: {type: string}}
      properties:
        "e.g. EUR": {type: string}
        items: {type: array, items: {type: object, properties: {colour: {type: string}}}}
        shape: {enum: [{sides: 3}], default: {sides: 3}, examples: [{anything: goes}], const: {sides: 3}}
        secret: {type: string}
    sensitive_params: [secret]
    http: {url: "http://127.0.0.1:9/things/{{.Params.shape}}"}
`))
	require.NoError(t, err)
}
