package catalog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSendsNothingReadsNoCredentials (issue 50 item 17): with SendsNothing a connection's
// credentials are named but not read, so a file whose secrets are absent loads; a connection an
// MCP server uses is still read whole, since its server is asked for its tools.
func TestSendsNothingReadsNoCredentials(t *testing.T) {
	t.Parallel()
	file := []byte(`connections:
  - name: billing
    base_url: https://billing.example
    auth: {bearer: {env: BILLING_TOKEN}}
tools:
  - name: billing.charge
    description: d
    effect: write
    params_schema: {type: object}
    http: {connection: billing, url: /charge}
`)
	none := func(string) string { return "" }
	_, err := LoadWith(file, Options{Getenv: none})
	require.ErrorContains(t, err, "{env: BILLING_TOKEN}: the environment variable is not set")
	c, err := LoadWith(file, Options{Getenv: none, SendsNothing: true})
	require.NoError(t, err)
	tool, _ := c.Get("billing.charge")
	assert.Equal(t, "{env: BILLING_TOKEN}", tool.HTTP.Connection.Auth.Bearer.String())

	withServer := append(file, []byte(`mcp_servers:
  - name: pay
    url: https://billing.example/mcp
    connection: billing
`)...)
	_, err = LoadWith(withServer, Options{Getenv: none, SendsNothing: true})
	require.ErrorContains(t, err, "{env: BILLING_TOKEN}: the environment variable is not set", "its server is asked: the connection's credentials are read")
}
