package static_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/internal/openapispec"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/static"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocumentIsCurrent: the embedded document, docs/openapi.json and what the generator
// builds now are the same bytes; `go generate ./static` fixes a failure.
func TestDocumentIsCurrent(t *testing.T) {
	t.Parallel()
	built, err := openapispec.Build()
	require.NoError(t, err)
	docs, err := os.ReadFile("../docs/openapi.json")
	require.NoError(t, err)
	assert.Equal(t, string(built), string(static.OpenAPI()), "static/openapi.json is stale: run go generate ./static")
	assert.Equal(t, string(built), string(docs), "docs/openapi.json is stale: run go generate ./static")
}

// TestDocumentIsValid: the document is valid OpenAPI 3.1 and names every problem type and
// state the gateway has.
func TestDocumentIsValid(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(static.OpenAPI())
	require.NoError(t, err)
	require.True(t, doc.IsOpenAPI31OrLater())
	require.NoError(t, doc.Validate(context.Background()))

	schemas := doc.Components.Schemas
	var types []string
	for _, v := range schemas["Problem"].Value.Properties["type"].Value.Enum {
		types = append(types, v.(string))
	}
	var want []string
	for _, p := range problems.All() {
		want = append(want, p.URI())
	}
	assert.Equal(t, want, types, "Problem.type lists every problem type, in table order")
	// The document's Problem is the wire form the API writes: problems.Body, member for member.
	var members []string
	bt := reflect.TypeFor[problems.Body]()
	for i := range bt.NumField() {
		members = append(members, strings.Split(bt.Field(i).Tag.Get("json"), ",")[0])
	}
	var documented []string
	for name := range schemas["Problem"].Value.Properties {
		documented = append(documented, name)
	}
	assert.ElementsMatch(t, members, documented, "Problem's properties are problems.Body's members")
	for _, v := range schemas["OperationState"].Value.Enum {
		assert.True(t, models.State(v.(string)).Valid(), "state %v", v)
	}
	assert.Len(t, schemas["OperationState"].Value.Enum, 6)
}

func TestHandler(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	static.OpenAPIHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.Equal(t, static.OpenAPI(), rec.Body.Bytes())
}
