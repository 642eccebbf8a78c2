package catalog

import (
	"encoding/json"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func urlTool(t *testing.T, httpURL, reconcileURL string) *Tool {
	t.Helper()
	tl := closeTool()
	set(tl, "http.url", httpURL)
	if reconcileURL != "" {
		set(tl, "reconcile.url", reconcileURL)
	}
	c, err := Load(fileOf(t, tl))
	require.NoError(t, err)
	got, _ := c.Get("tickets.close")
	return got
}

func TestRenderURLEscapesValues(t *testing.T) {
	t.Parallel()
	tl := urlTool(t, "https://api.example.com/t/{{.Tenant}}/tickets/{{.Params.id}}/close?op={{.OperationID}}&k={{.Key}}#{{.Params.id}}", "")
	tests := []struct {
		name string
		id   any
		want string
	}{
		{"plain", "T-1", "https://api.example.com/t/acme/tickets/T-1/close?op=op_1&k=key+1#T-1"},
		{"traversal and query", "../admin?x=1#y", "https://api.example.com/t/acme/tickets/..%2Fadmin%3Fx=1%23y/close?op=op_1&k=key+1#..%2Fadmin%3Fx%3D1%23y"},
		{"another host", "evil.com/", "https://api.example.com/t/acme/tickets/evil.com%2F/close?op=op_1&k=key+1#evil.com%2F"},
		{"authority", "@evil.com:80", "https://api.example.com/t/acme/tickets/@evil.com:80/close?op=op_1&k=key+1#%40evil.com%3A80"},
		{"percent", "%2e%2e", "https://api.example.com/t/acme/tickets/%252e%252e/close?op=op_1&k=key+1#%252e%252e"},
		{"number", json.Number("42"), "https://api.example.com/t/acme/tickets/42/close?op=op_1&k=key+1#42"},
		{"float", 1.5, "https://api.example.com/t/acme/tickets/1.5/close?op=op_1&k=key+1#1.5"},
		{"bool", true, "https://api.example.com/t/acme/tickets/true/close?op=op_1&k=key+1#true"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tl.RenderURL(TemplateData{OperationID: "op_1", Key: "key 1", Tenant: "acme", Params: map[string]any{"id": tc.id}})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			u, err := url.Parse(got)
			require.NoError(t, err)
			assert.Equal(t, "api.example.com", u.Host)
			assert.Len(t, strings.Split(u.EscapedPath(), "/"), 6, "the path keeps its segments")
			assert.Equal(t, []string{"k", "op"}, keys(u.Query()), "query keeps its parameters")
		})
	}
}

func keys(v url.Values) []string {
	out := make([]string, 0, len(v))
	for k := range v {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestRenderURLRejectsUnsafeValues(t *testing.T) {
	t.Parallel()
	tl := urlTool(t, "http://127.0.0.1:9100/tickets/{{.Params.id}}/close", "")
	tests := []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"dot dot", map[string]any{"id": ".."}, `tool "tickets.close": render http.url: a URL path segment is "." or ".."`},
		{"dot", map[string]any{"id": "."}, `a URL path segment is "." or ".."`},
		{"empty", map[string]any{"id": ""}, `.Params.id is empty, which would change the URL path`},
		{"missing", map[string]any{}, `.Params.id is missing`},
		{"no params", nil, `.Params.id is missing`},
		{"null", map[string]any{"id": nil}, `.Params.id is null`},
		{"object", map[string]any{"id": map[string]any{"a": 1}}, `.Params.id is not a string, number or boolean`},
		{"list", map[string]any{"id": []any{"a"}}, `.Params.id is not a string, number or boolean`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tl.RenderURL(TemplateData{Params: tc.params})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRenderURLEmptyQueryValueIsFine(t *testing.T) {
	t.Parallel()
	tl := urlTool(t, "http://127.0.0.1:9100/tickets", "http://127.0.0.1:9100/tickets?reference={{.OperationID}}&q={{.Params.q}}")
	got, err := tl.RenderReconcileURL(TemplateData{OperationID: "op_1", Params: map[string]any{"q": ""}})
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:9100/tickets?reference=op_1&q=", got)

	got, err = tl.RenderReconcileURL(TemplateData{OperationID: "op 1&reference=x", Params: map[string]any{"q": "a=b"}})
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:9100/tickets?reference=op+1%26reference%3Dx&q=a%3Db", got)
}

func TestRenderReconcileURLWithoutReconcile(t *testing.T) {
	t.Parallel()
	tl := urlTool(t, "http://127.0.0.1:9100/tickets", "")
	_, err := tl.RenderReconcileURL(TemplateData{})
	require.EqualError(t, err, `tool "tickets.close": no reconcile declared`)
}

func TestRenderURLOnToolBuiltByHand(t *testing.T) {
	t.Parallel()
	tl := &Tool{Name: "x", HTTP: HTTPSpec{URL: "http://127.0.0.1:9100/x/{{.Params.id}}"},
		Reconcile: &ReconcileSpec{URL: "http://{{.Params.id}}/"}}
	got, err := tl.RenderURL(TemplateData{Params: map[string]any{"id": "a/b"}})
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:9100/x/a%2Fb", got)
	_, err = tl.RenderReconcileURL(TemplateData{Params: map[string]any{"id": "evil.com"}})
	require.ErrorContains(t, err, "the scheme and host must be literal")
}

func TestURLTemplateSyntax(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src, want string
	}{
		{"http://h/{{ .Params.id }}", "http://h/v"},
		{"http://h/{{$.Params.id}}", "http://h/v"},
		{"http://h/x-{{- .Params.id -}} /y", "http://h/x-v/y"},
		{"http://h/{{/* comment */}}{{.Params.id}}", "http://h/v"},
		{"http://h?{{.Params.id}}", "http://h?v"},
		{"http://h", "http://h"},
	}
	for _, tc := range tests {
		ut, err := parseURLTemplate(tc.src)
		require.NoError(t, err, tc.src)
		got, err := ut.render(func([]string) (any, error) { return "v", nil })
		require.NoError(t, err, tc.src)
		assert.Equal(t, tc.want, got, tc.src)
	}
	for _, bad := range []string{`http://h/{{define "x"}}a{{end}}`, "http://h/{{.Params.a | print}}", "http://h/{{$x := .Key}}", "http://h/{{range .Params.a}}{{end}}", "http://h/{{.}}"} {
		_, err := parseURLTemplate(bad)
		assert.Error(t, err, bad)
	}
}

func TestRenderCompensation(t *testing.T) {
	t.Parallel()
	tl := &Tool{Name: "refunds.issue", Compensation: &CompensationSpec{Tool: "refunds.reverse", Params: map[string]any{
		"refund_id":    "{{.Result.id}}",
		"amount_cents": "{{ .Result.amount_cents }}",
		"captured":     "{{.Result.captured}}",
		"meta":         "{{.Result.meta}}",
		"nothing":      "{{.Result.none}}",
		"reason":       "undo {{.OperationID}} for {{.Tenant}} ({{.Params.order_id}}, {{.Result.amount_cents}} cents, key {{.Key}})",
		"literal":      "no templates here",
		"fixed":        json.Number("7"),
		"flag":         false,
		"nested":       map[string]any{"list": []any{"{{.Params.order_id}}", json.Number("1"), nil}},
	}}}
	meta := map[string]any{"source": "agent", "tags": []any{"a"}}
	data := TemplateData{OperationID: "op_1", Key: "k1", Tenant: "acme",
		Params: map[string]any{"order_id": "O-9"},
		Result: map[string]any{"id": "R-1", "amount_cents": json.Number("1999"), "captured": true, "meta": meta, "none": nil}}

	got, err := tl.RenderCompensation(data)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"refund_id":    "R-1",
		"amount_cents": json.Number("1999"),
		"captured":     true,
		"meta":         map[string]any{"source": "agent", "tags": []any{"a"}},
		"nothing":      nil,
		"reason":       "undo op_1 for acme (O-9, 1999 cents, key k1)",
		"literal":      "no templates here",
		"fixed":        json.Number("7"),
		"flag":         false,
		"nested":       map[string]any{"list": []any{"O-9", json.Number("1"), nil}},
	}, got)

	// The result is a copy: changing it changes neither the data nor the next rendering.
	got["meta"].(map[string]any)["source"] = "changed"
	got["nested"].(map[string]any)["list"].([]any)[0] = "changed"
	assert.Equal(t, "agent", meta["source"])
	again, err := tl.RenderCompensation(data)
	require.NoError(t, err)
	assert.Equal(t, "O-9", again["nested"].(map[string]any)["list"].([]any)[0])

	b, err := json.Marshal(got["amount_cents"])
	require.NoError(t, err)
	assert.Equal(t, "1999", string(b), "a number stays a number in JSON")
}

func TestRenderCompensationErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"missing result field", map[string]any{"id": "{{.Result.ref}}"}, `tool "a": render compensation params: id: .Result.ref is missing`},
		{"field of a scalar", map[string]any{"id": "{{.Result.id.x}}"}, `tool "a": render compensation params: id: .Result.id is not an object`},
		{"object inside text", map[string]any{"r": "x {{.Result.obj}}"}, `tool "a": render compensation params: r: .Result.obj is not a string, number or boolean`},
		{"nested path", map[string]any{"a": map[string]any{"b": []any{"{{.Params.nope}}"}}}, `tool "a": render compensation params: a.b[0]: .Params.nope is missing`},
		{"bad template", map[string]any{"a": "{{.Foo}}"}, `tool "a": compensation params: a: invalid template "{{.Foo}}"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tl := &Tool{Name: "a", Compensation: &CompensationSpec{Tool: "b", Params: tc.params}}
			_, err := tl.RenderCompensation(TemplateData{Params: map[string]any{}, Result: map[string]any{"id": "R-1", "obj": map[string]any{}}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := (&Tool{Name: "a"}).RenderCompensation(TemplateData{})
	require.EqualError(t, err, `tool "a": no compensation declared`)
}

func TestRenderCompensationFromLoad(t *testing.T) {
	t.Parallel()
	c, err := Load(fileOf(t, baseTool(), closeTool()))
	require.NoError(t, err)
	tl, _ := c.Get("tickets.create")
	got, err := tl.RenderCompensation(TemplateData{OperationID: "op_1", Result: map[string]any{"id": "T-1001"}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"ticket_id": "T-1001", "reason": "compensation for op_1"}, got)
}
