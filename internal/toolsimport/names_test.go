package toolsimport

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestImportSnakeCase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"PostRefunds":            "post_refunds",
		"getPetByID":             "get_pet_by_id",
		"getHTTPStatus":          "get_http_status",
		"GetV1Refunds":           "get_v1_refunds",
		"oauth2Token":            "oauth2_token",
		"list-pets by_owner":     "list_pets_by_owner",
		"already_snake":          "already_snake",
		"get_/v1/refunds/{id}":   "get_v1_refunds_id",
		"PostRefundsRefundClose": "post_refunds_refund_close",
	} {
		assert.Equal(t, want, snakeCase(in), in)
	}
}

// TestImportToolNameFits: a name over the 64 characters OpenAI and Anthropic take (dots
// counted as "__") is cut and ends in a hash, so two long ids stay two names.
func TestImportToolNameFits(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "stripe.post_refunds", toolName("stripe", "PostRefunds"))
	long1 := toolName("stripe", "PostTestHelpersIssuingAuthorizationsAuthorizationFinalizeAmount")
	long2 := toolName("stripe", "PostTestHelpersIssuingAuthorizationsAuthorizationFinalizeAmounts")
	for _, n := range []string{long1, long2} {
		assert.True(t, fits(n), n)
		assert.LessOrEqual(t, len(strings.ReplaceAll(n, ".", "__")), 64, n)
		assert.True(t, strings.HasPrefix(n, "stripe.post_test_helpers_issuing_"), n)
	}
	assert.NotEqual(t, long1, long2)
}

func TestImportSplitCommand(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"npx -y @modelcontextprotocol/server-memory": {"npx", "-y", "@modelcontextprotocol/server-memory"},
		"  node   'my dir/server.js'  --flag ":       {"node", "my dir/server.js", "--flag"},
		`python -c "print(\"hi\") # \x"`:             {"python", "-c", `print("hi") # \x`},
		`a\ b 'it'"'"'s' ""`:                         {"a b", "it's", ""},
		"docker run -e KEY=v\tmcp/fetch":             {"docker", "run", "-e", "KEY=v", "mcp/fetch"},
	} {
		got, err := SplitCommand(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for in, want := range map[string]string{
		"":           "empty command line",
		"   ":        "empty command line",
		"node 'oops": "unclosed ' quote",
		`node "oops`: `unclosed " quote`,
		`node oops\`: "ends in a backslash",
	} {
		_, err := SplitCommand(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
	}
}

func TestImportServerNames(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"npx -y @modelcontextprotocol/server-memory":          "memory",
		"npx -y @modelcontextprotocol/server-filesystem /tmp": "filesystem",
		"uvx mcp-server-fetch":                                "fetch",
		"node /repo/node_modules/.bin/mcp-server-memory":      "memory",
		"node /srv/weather-mcp/dist/index.js":                 "weather",
		"docker run -i --rm -e TOKEN=x mcp/github:latest":     "github",
		"npx @acme/tickets-mcp-server@1.2.3":                  "tickets",
		"/usr/local/bin/Linear_MCP":                           "linear",
	} {
		words, err := SplitCommand(in)
		require.NoError(t, err)
		assert.Equal(t, want, nameFromCommand(words), in)
	}
	for in, want := range map[string]string{
		"https://mcp.notion.com/mcp":        "notion",
		"https://mcp.example.co.uk/v1/mcp":  "example",
		"http://127.0.0.1:8931/mcp":         "127-0-0-1",
		"http://localhost:3000/mcp":         "localhost",
		"https://tools.internal.corp.local": "corp",
	} {
		assert.Equal(t, want, nameFromURL(in), in)
	}
	assert.Equal(t, "", serverName("---"))
	assert.Equal(t, strings.Repeat("a", 32), serverName(strings.Repeat("a", 40)))
}
