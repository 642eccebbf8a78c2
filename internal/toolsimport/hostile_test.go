package toolsimport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fanOut is a document of a few kilobytes whose schemas each name the next forty times, five
// deep: expanded, 40^4 schemas per operation. Before the bound an import of it took 3.7 GB.
func fanOut(t *testing.T) []byte {
	t.Helper()
	schemas := map[string]any{"S5": map[string]any{"type": "string"}}
	for k := range 5 {
		props := map[string]any{}
		for i := range 40 {
			props[fmt.Sprintf("p%d", i)] = map[string]any{"$ref": fmt.Sprintf("#/components/schemas/S%d", k+1)}
		}
		schemas[fmt.Sprintf("S%d", k)] = map[string]any{"type": "object", "properties": props}
	}
	body := map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/S0"}}}}
	doc := map[string]any{"openapi": "3.0.3", "info": map[string]any{"title": "fan", "version": "1"},
		"servers": []any{map[string]any{"url": "https://api.example.com"}},
		"paths": map[string]any{"/r": map[string]any{"post": map[string]any{"operationId": "r", "requestBody": body,
			"responses": map[string]any{"200": map[string]any{"description": "ok"}}}}},
		"components": map[string]any{"schemas": schemas}}
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	return b
}

func TestImportRefusesAnExpansionPastItsBound(t *testing.T) {
	t.Parallel()
	data := fanOut(t)
	require.Less(t, len(data), 16<<10, "a small document")
	_, err := OpenAPI(data, OpenAPIOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "operation r: its $refs expand past 64 MiB of schemas: the document is refused")
}

func TestImportKeepsADocumentsBracesOutOfTemplates(t *testing.T) {
	t.Parallel()
	doc := `{"openapi":"3.0.3","info":{"title":"braces","version":"1"},
"servers":[{"url":"https://api.example.com/{{.Tenant}}"}],
"paths":{"/items/{{id}}/x{{.Params.evil}}":{"get":{"operationId":"get_item",
"parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],
"responses":{"200":{"description":"ok"}}}}}}`
	f, err := OpenAPI([]byte(doc), OpenAPIOptions{})
	require.NoError(t, err)
	require.Len(t, f.Tools, 1)
	u := f.Tools[0].HTTP.URL
	assert.Equal(t, "https://api.example.com/%7B%7B.Tenant%7D%7D/items/%7B{{.Params.id}}%7D/x%7B{{.Params.params_evil}}%7D", u,
		"each {name} is a param; every other brace is encoded")
	var buf bytes.Buffer
	require.NoError(t, f.WriteYAML(&buf))
	assert.NotContains(t, buf.String(), "{{.Tenant")
	loadImported(t, buf.String(), "")
}
