package apidoc_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgate/idemgate/apidoc"
	"github.com/idemgate/idemgate/internal/openapispec"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/problems"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocumentIsCurrent: the embedded document, docs/openapi.json and what the generator
// builds now are the same bytes; `go generate ./apidoc` fixes a failure.
func TestDocumentIsCurrent(t *testing.T) {
	t.Parallel()
	built, err := openapispec.Build()
	require.NoError(t, err)
	docs, err := os.ReadFile("../docs/openapi.json")
	require.NoError(t, err)
	assert.Equal(t, string(built), string(apidoc.JSON()), "apidoc/openapi.json is stale: run go generate ./apidoc")
	assert.Equal(t, string(built), string(docs), "docs/openapi.json is stale: run go generate ./apidoc")
}

// TestDocumentIsValid: the document is valid OpenAPI 3.1 and names every problem type and
// state the gateway has.
func TestDocumentIsValid(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(apidoc.JSON())
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
	for _, v := range schemas["OperationState"].Value.Enum {
		assert.True(t, models.State(v.(string)).Valid(), "state %v", v)
	}
	assert.Len(t, schemas["OperationState"].Value.Enum, 6)
}

func TestHandler(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	apidoc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.Equal(t, apidoc.JSON(), rec.Body.Bytes())
}
