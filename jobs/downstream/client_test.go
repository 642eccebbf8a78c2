package downstream_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/downstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionClientPresentsTheConnection: every request of a long-lived session (an MCP
// server's, over Streamable HTTP) carries its connection's credentials and fixed headers, and
// Used names the values for the scrubber; redirects are not followed.
func TestSessionClientPresentsTheConnection(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Tenant-Hint"))
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	env := map[string]string{"MCP_TOKEN": "tok-3141"}
	c, err := catalog.LoadWith([]byte(`
connections:
  - name: pay
    auth: {bearer: {env: MCP_TOKEN}}
    headers: {X-Tenant-Hint: all}
mcp_servers:
  - name: pay
    url: `+srv.URL+`/mcp
    connection: pay
`), catalog.Options{Getenv: func(k string) string { return env[k] }, MCP: noTools{}})
	require.NoError(t, err)
	conn := c.MCPServers()[0].Connection
	require.NotNil(t, conn)
	sc, err := downstream.NewConnector().SessionClient(conn)
	require.NoError(t, err)
	for _, path := range []string{"/mcp", "/moved"} {
		resp, err := sc.Post(srv.URL+path, "application/json", strings.NewReader("{}"))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, []string{"Bearer tok-3141|all", "Bearer tok-3141|all"}, seen, "no redirect followed")
	assert.Contains(t, sc.Used(), "tok-3141")
}

type noTools struct{}

func (noTools) ListTools(*catalog.MCPServer) ([]catalog.UpstreamTool, error) { return nil, nil }
