package toolsimport

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// mcpFile is the shape docs/MCP.md gives an mcp_servers file, as far as import writes it.
type mcpFile struct {
	MCPServers []struct {
		Name       string   `yaml:"name"`
		Command    []string `yaml:"command"`
		URL        string   `yaml:"url"`
		Connection string   `yaml:"connection"`
		Tools      []struct {
			Upstream string `yaml:"upstream"`
			Name     string `yaml:"name"`
			Effect   string `yaml:"effect"`
		} `yaml:"tools"`
	} `yaml:"mcp_servers"`
}

// parseMCPFile decodes out strictly: a field docs/MCP.md does not name is an error.
func parseMCPFile(t *testing.T, out string) mcpFile {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(out))
	dec.KnownFields(true)
	var f mcpFile
	require.NoError(t, dec.Decode(&f), out)
	return f
}

// TestImportMCPURL: the tools of a server reached by Streamable HTTP (the official SDK's own
// server, listing two tools a page) are all listed, each effect from its annotations, with
// the connection named, and a name the catalog would refuse replaced.
func TestImportMCPURL(t *testing.T) {
	t.Parallel()
	server := mcp.NewServer(&mcp.Implementation{Name: "catalogue", Version: "0.1.0"}, &mcp.ServerOptions{PageSize: 2})
	nothing := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	schema := map[string]any{"type": "object"}
	for _, tool := range []*mcp.Tool{
		{Name: "lookup", Description: "Find an item.\nSecond line.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "upsert", Title: "Upsert an item", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}},
		{Name: "send", Description: "Send a message", Annotations: &mcp.ToolAnnotations{Title: "Send"}},
		{Name: "legacy", Description: "An old tool"},
		{Name: "getThing", Description: "Get a thing", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
	} {
		tool.InputSchema = schema
		server.AddTool(tool, nothing)
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := MCP(ctx, MCPOptions{URL: srv.URL + "/mcp", Connection: "catalogue-api", HTTPClient: srv.Client()})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, f.WriteYAML(&buf))
	out := buf.String()

	parsed := parseMCPFile(t, out)
	require.Len(t, parsed.MCPServers, 1)
	s := parsed.MCPServers[0]
	assert.Equal(t, "127-0-0-1", s.Name, "from the host")
	assert.Equal(t, srv.URL+"/mcp", s.URL)
	assert.Equal(t, "catalogue-api", s.Connection)
	assert.Empty(t, s.Command)
	effects := map[string]string{}
	names := map[string]string{}
	for _, tool := range s.Tools {
		effects[tool.Upstream], names[tool.Upstream] = tool.Effect, tool.Name
	}
	assert.Equal(t, map[string]string{"lookup": "read", "upsert": "idempotent", "send": "write", "legacy": "write", "getThing": "read"},
		effects, "every page listed; readOnlyHint before idempotentHint; no annotations: write")
	assert.Equal(t, "127-0-0-1.get_thing", names["getThing"], "the default 127-0-0-1.getThing has capitals")
	assert.Empty(t, names["lookup"], "a valid default is left to the default")

	assert.Contains(t, out, "# Find an item.\n", "the description's first line")
	assert.NotContains(t, out, "Second line")
	assert.Contains(t, out, "# Upsert an item\n", "the title")
	assert.Contains(t, out, "# Send: Send a message\n", "the annotations' title, and the description")
	assert.Contains(t, out, "# no annotations: effect write")
	assert.Contains(t, out, "catalogue 0.1.0", "the server's own name in the header")
	assert.Contains(t, out, `Connection "catalogue-api" is not declared here`)
}

// TestImportMCPRefusals: options that contradict each other, and a server that exits at start
// (its stderr quoted, to say why).
func TestImportMCPRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts MCPOptions
		want string
	}{
		{"neither", MCPOptions{}, "give the MCP server's command or URL"},
		{"both", MCPOptions{Command: []string{"x"}, URL: "http://127.0.0.1:1/mcp"}, "not both"},
		{"connection with a command", MCPOptions{Command: []string{"x"}, Connection: "c"}, "a connection is for a server reached by URL"},
		{"bad name", MCPOptions{URL: "http://127.0.0.1:1/mcp", Name: "My Server"}, `invalid server name "My Server"`},
		{"no name to derive", MCPOptions{Command: []string{"/"}}, "give one with --name"},
		{"server exits", MCPOptions{Command: []string{"sh", "-c", "echo 'cannot open the memory file' >&2; exit 3"}, Name: "broken"},
			"the server's stderr ends: cannot open the memory file"},
		{"nothing listens", MCPOptions{URL: "http://127.0.0.1:1/mcp"}, "connect to MCP server http://127.0.0.1:1/mcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			f, err := MCP(ctx, tc.opts)
			require.Error(t, err)
			assert.Nil(t, f)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
