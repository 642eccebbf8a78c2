package toolsimport

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// importPets imports testdata/pets.yaml and returns the file, its YAML and the tools by name.
func importPets(t *testing.T, opts OpenAPIOptions) (*File, string, map[string]HTTPTool) {
	t.Helper()
	data, err := os.ReadFile("testdata/pets.yaml")
	require.NoError(t, err)
	f, err := OpenAPI(data, opts)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, f.WriteYAML(&buf))
	byName := map[string]HTTPTool{}
	for _, tool := range f.Tools {
		byName[tool.Name] = tool
	}
	return f, buf.String(), byName
}

// loadImported loads the printed file with the catalog, as the gateway would once a person has
// declared the connection (if any) the tools name.
func loadImported(t *testing.T, out, connection string) *catalog.Catalog {
	t.Helper()
	if connection != "" {
		out = "connections:\n  - name: " + connection + "\n    base_url: https://eu.pets.example\n" + out
	}
	c, err := catalog.Load([]byte(out))
	require.NoError(t, err, "the catalog takes what import prints:\n%s", out)
	return c
}

// TestImportOpenAPI: every operation a tool can be is imported, named <prefix>.<snake case>,
// with its effect from its method, path params templated, the body's encoding and fields, and
// OpenAPI 3.0's spellings turned into JSON Schema 2020-12 the catalog compiles.
func TestImportOpenAPI(t *testing.T) {
	t.Parallel()
	f, out, tools := importPets(t, OpenAPIOptions{Source: "pets.yaml"})
	var names []string
	for _, tool := range f.Tools {
		names = append(names, tool.Name)
	}
	assert.Equal(t, []string{"api.list_pets", "api.create_pet", "api.get_pet_by_id", "api.replace_pet", "api.delete_pet",
		"api.upload_pet_photo"}, names, "by path, then GET, PUT, POST, PATCH, DELETE; HEAD is no tool")
	assert.Contains(t, f.Header[0], "Pet Store 1.0 (pets.yaml), OpenAPI 3.0.3: 6 operation(s)")

	effects := map[string]string{"api.list_pets": "read", "api.get_pet_by_id": "read", "api.replace_pet": "idempotent",
		"api.delete_pet": "idempotent", "api.create_pet": "write", "api.upload_pet_photo": "write"}
	for name, effect := range effects {
		assert.Equal(t, effect, tools[name].Effect, name)
	}

	get := tools["api.get_pet_by_id"]
	assert.Equal(t, "Get a pet", get.Description)
	assert.Equal(t, "GET", get.HTTP.Method)
	assert.Equal(t, "https://eu.pets.example/v2/pets/{{.Params.pet_id}}", get.HTTP.URL,
		"the server's variable takes its default; pet-id is no Go identifier, so the param is pet_id")
	assert.Empty(t, get.HTTP.Body, "a GET sends no body")
	assert.Equal(t, map[string]any{"type": "object", "required": []string{"pet_id"}, "additionalProperties": false,
		"properties": map[string]any{"pet_id": map[string]any{"type": "string", "pattern": "^p_[a-z0-9]+$", "description": "The pet's id."}}},
		get.ParamsSchema, "a GET takes only its URL's params, so others are refused, not dropped")

	list := tools["api.list_pets"]
	assert.Equal(t, "https://eu.pets.example/v2/pets?species={{.Params.species}}", list.HTTP.URL)
	assert.Equal(t, []string{"species"}, list.ParamsSchema["required"])
	assert.Equal(t, map[string]any{"type": "integer"}, list.ParamsSchema["properties"].(map[string]any)["limit"],
		"an optional query param of a GET is a param: the GET sends it in its query when given")
	assert.NotContains(t, list.ParamsSchema["required"], "limit")
	assert.NotContains(t, strings.Join(list.Notes, "\n"), "left out: the query parameters")
	assert.Contains(t, strings.Join(list.Notes, "\n"), "left out: the header parameters X-Trace")

	create := tools["api.create_pet"]
	assert.Equal(t, "Adds a pet to the store.", create.Description, "no summary: the description's first line, without markup")
	assert.Equal(t, "form", create.HTTP.Body)
	assert.Equal(t, "idempotency-key", create.HTTP.IdempotencyHeader, "the document declares the header")
	assert.Empty(t, create.HTTP.SuggestedIdempotencyHeader)
	props := create.ParamsSchema["properties"].(map[string]any)
	assert.NotContains(t, props, "id", "readOnly: the server sets it")
	assert.Equal(t, []string{"name"}, create.ParamsSchema["required"])
	assert.Equal(t, []string{"string", "null"}, props["tag"].(map[string]any)["type"], "nullable")
	assert.Equal(t, map[string]any{"type": "integer", "exclusiveMinimum": float64(0)}, props["age"], "3.0's boolean exclusive bound")
	assert.Equal(t, []any{"Rex"}, props["name"].(map[string]any)["examples"])
	assert.NotContains(t, props["nickname"], "pattern", "a lookahead Go cannot compile is left out…")
	assert.Contains(t, strings.Join(create.Notes, "\n"), "^(?!admin).*$", "…and said so")
	assert.Equal(t, map[string]any{"type": "object", "$comment": truncatedComment}, props["parent"], "the recursion is cut where it repeats")
	assert.Contains(t, strings.Join(create.Notes, "\n"), "not expanded further")

	put := tools["api.replace_pet"]
	assert.Empty(t, put.HTTP.Body, "JSON, the default")
	assert.Empty(t, put.HTTP.SuggestedIdempotencyHeader, "a PUT is idempotent anyway")
	assert.ElementsMatch(t, []string{"name", "owner", "pet_id"}, put.ParamsSchema["required"], "allOf merged; required kept")
	assert.Contains(t, put.ParamsSchema["properties"], "owner")
	assert.NotContains(t, strings.Join(put.Notes, "\n"), "pet_id included", "the path param goes in the URL only: no warning")

	del := tools["api.delete_pet"]
	assert.Equal(t, "none", del.HTTP.Body, "no request body: none, so the path param is not sent as one")

	upload := tools["api.upload_pet_photo"]
	assert.Equal(t, "none", upload.HTTP.Body)
	assert.Contains(t, strings.Join(upload.Notes, "\n"), "multipart/form-data")
	assert.Equal(t, "Idempotency-Key", upload.HTTP.SuggestedIdempotencyHeader, "a write without a declared header: suggested, commented out")
	assert.Contains(t, out, "      # idempotency_header: Idempotency-Key", "inside http:, where uncommenting it works")
	assert.NotContains(t, out, "x-internal")
	assert.NotContains(t, out, "discriminator")
	assert.NotContains(t, out, "readOnly")

	c := loadImported(t, out, "")
	tool, ok := c.Get("api.get_pet_by_id")
	require.True(t, ok)
	u, err := tool.RenderURL(catalog.TemplateData{Params: map[string]any{"pet_id": "p_1/2"}})
	require.NoError(t, err)
	assert.Equal(t, "https://eu.pets.example/v2/pets/p_1%2F2", u)
	createTool, _ := c.Get("api.create_pet")
	assert.Empty(t, createTool.ValidateParams(decode(t, `{"name":"Rex","tag":null,"age":2,"parent":{"name":"Ma"}}`)))
	assert.NotEmpty(t, createTool.ValidateParams(decode(t, `{"name":"Rex","age":0}`)), "exclusive minimum")
	assert.Equal(t, "idempotency-key", createTool.HTTP.IdempotencyHeader, "as the document spells it")

	uncommented := strings.ReplaceAll(out, "# idempotency_header:", "idempotency_header:")
	c = loadImported(t, uncommented, "")
	uploadTool, _ := c.Get("api.upload_pet_photo")
	assert.Equal(t, "Idempotency-Key", uploadTool.HTTP.IdempotencyHeader, "the suggestion, once a person turns it on")
}

// TestImportOpenAPIWithConnection: with --connection the tools are named after it, name it in
// http, and give URLs as paths under its base_url (the server's path kept).
func TestImportOpenAPIWithConnection(t *testing.T) {
	t.Parallel()
	f, out, tools := importPets(t, OpenAPIOptions{Connection: "pets", Operations: []string{"deletePet", "listPets"}})
	require.Len(t, f.Tools, 2)
	assert.Equal(t, "pets.delete_pet", f.Tools[0].Name, "in the order asked for")
	assert.Equal(t, "pets.list_pets", f.Tools[1].Name)
	del := tools["pets.delete_pet"]
	assert.Equal(t, "pets", del.HTTP.Connection)
	assert.Equal(t, "/v2/pets/{{.Params.pet_id}}", del.HTTP.URL)
	assert.Contains(t, strings.Join(f.Header, "\n"), `Connection "pets" is not declared here`)
	assert.Contains(t, strings.Join(f.Header, "\n"), "base_url https://eu.pets.example.", "the document's server, for the reviewer")
	assert.Contains(t, strings.Join(f.Header, "\n"), "apiKey (apiKey header X-Api-Key)")
	assert.NotContains(t, out, "\nconnections:", "the connection is the reviewer's to declare")

	c := loadImported(t, out, "pets")
	tool, ok := c.Get("pets.delete_pet")
	require.True(t, ok)
	u, err := tool.RenderURL(catalog.TemplateData{Params: map[string]any{"pet_id": "p_1"}})
	require.NoError(t, err)
	assert.Equal(t, "https://eu.pets.example/v2/pets/p_1", u)
}

// TestImportOpenAPIRefusals: an operation the document lacks is refused by name (with the id
// it probably means), a HEAD operation is no tool, and a bad connection name or document is
// refused before anything is printed.
func TestImportOpenAPIRefusals(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/pets.yaml")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		data []byte
		opts OpenAPIOptions
		want []string
	}{
		{"unknown operation", data, OpenAPIOptions{Operations: []string{"listPets", "PostRefunds"}},
			[]string{"unknown operation PostRefunds", "no such operationId"}},
		{"misspelt operation", data, OpenAPIOptions{Operations: []string{"list_pets"}},
			[]string{"unknown operation list_pets (did you mean listPets?)"}},
		{"HEAD operation", data, OpenAPIOptions{Operations: []string{"headPets"}},
			[]string{"headPets (a HEAD operation"}},
		{"bad connection name", data, OpenAPIOptions{Connection: "Pets API"}, []string{`invalid connection name "Pets API"`}},
		{"not OpenAPI 3", []byte(`{"swagger": "2.0", "info": {"title": "x", "version": "1"}, "paths": {}}`), OpenAPIOptions{},
			[]string{"not an OpenAPI 3 document"}},
		{"not a document", []byte("{"), OpenAPIOptions{}, []string{"read OpenAPI document"}},
		{"no absolute server", []byte("openapi: 3.0.3\ninfo: {title: x, version: '1'}\npaths:\n  /a: {get: {operationId: a, responses: {'200': {description: ok}}}}\n"),
			OpenAPIOptions{}, []string{"no absolute server URL", "--connection"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := OpenAPI(tc.data, tc.opts)
			require.Error(t, err)
			assert.Nil(t, f)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func decode(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

// TestImportIdempotencyHeader: --idempotency-header gives every write and idempotent tool the
// header the document does not declare; a read gets none, and a declared one is kept.
func TestImportIdempotencyHeader(t *testing.T) {
	t.Parallel()
	_, out, byName := importPets(t, OpenAPIOptions{IdempotencyHeader: "Idempotency-Key"})
	seen := 0
	for _, tl := range byName {
		switch tl.Effect {
		case "read":
			assert.Empty(t, tl.HTTP.IdempotencyHeader, tl.Name)
		default:
			seen++
			assert.NotEmpty(t, tl.HTTP.IdempotencyHeader, tl.Name)
			assert.Empty(t, tl.HTTP.SuggestedIdempotencyHeader, tl.Name)
		}
	}
	require.Positive(t, seen)
	assert.Contains(t, out, "idempotency_header: Idempotency-Key")
	loadImported(t, out, "")
}
