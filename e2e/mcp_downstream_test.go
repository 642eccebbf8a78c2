package e2e_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// npmServer is the path of a reference MCP server's program from e2e/agents (npm ci, which
// .ci/run runs, installs them at the versions package.json pins). Without it the test skips,
// unless CI is set: then it fails.
func npmServer(t *testing.T, bin string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("agents", "node_modules", ".bin", bin))
	require.NoError(t, err)
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s not installed: cd e2e/agents && npm ci", bin)
		}
		t.Fatalf("%s not installed (cd e2e/agents && npm ci), and CI must run this test: %v", bin, err)
	}
	return path
}

// memoryTools puts the reference memory server (a knowledge graph kept in a JSON-lines file)
// behind the gateway with a three-line entry: every one of its tools becomes an idemgate tool.
const memoryTools = `
mcp_servers:
  - name: memory
    command: [{{SERVER}}]
    env: {MEMORY_FILE_PATH: {{FILE}}}
`

// entityCount reads how many entities the memory server has written to its file: the side
// effects it actually performed.
func entityCount(t *testing.T, file, name string) int {
	t.Helper()
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["type"] == "entity" && rec["name"] == name {
			n++
		}
	}
	return n
}

// TestMemoryServerThroughTheJSONAPI: @modelcontextprotocol/server-memory over stdio; its tools
// are listed as idemgate tools (effects from annotations), a write runs once and is replayed,
// the same key with other params is refused, and a read sees the write. On both engines.
func TestMemoryServerThroughTheJSONAPI(t *testing.T) {
	t.Parallel()
	server := npmServer(t, "mcp-server-memory")
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		file := filepath.Join(t.TempDir(), "memory.jsonl")
		tools := strings.NewReplacer("{{SERVER}}", server, "{{FILE}}", file).Replace(memoryTools)
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: tools})

		create, ok := g.Catalog.Get("memory.create_entities")
		require.True(t, ok, "tools: %v", g.Catalog.Names())
		assert.Equal(t, "write", string(create.Effect))
		read, ok := g.Catalog.Get("memory.read_graph")
		require.True(t, ok)
		assert.Equal(t, "read", string(read.Effect), "readOnlyHint → read")
		assert.Contains(t, create.Downstream(), "memory")

		listed := g.Do(t, http.MethodGet, "/v1/tools", g.Key, nil, "")
		require.Equal(t, http.StatusOK, listed.Status)
		assert.Contains(t, string(listed.Body), `"memory.create_entities"`)

		params := `{"entities":[{"name":"Ada","entityType":"person","observations":["wrote the first program"]}]}`
		first := g.Submit(t, "remember-ada", "memory.create_entities", params, nil)
		op := requireOp(t, first, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"], "%s", first.Body)
		assert.Contains(t, string(first.Body), "Ada", "the upstream's structured result is the result")
		assert.Equal(t, 1, entityCount(t, file, "Ada"))

		replay := g.Submit(t, "remember-ada", "memory.create_entities", params, nil)
		requireReplay(t, replay, first)
		assert.Equal(t, 1, entityCount(t, file, "Ada"), "a replay performs nothing")

		other := g.Submit(t, "remember-ada", "memory.create_entities",
			`{"entities":[{"name":"Grace","entityType":"person","observations":[]}]}`, nil)
		assert.Equal(t, http.StatusUnprocessableEntity, other.Status, "%s", other.Body)
		assert.Equal(t, 0, entityCount(t, file, "Grace"))

		graph := g.Submit(t, "read-graph-1", "memory.read_graph", `{}`, nil)
		gop := requireOp(t, graph, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", gop["state"], "%s", graph.Body)
		assert.Contains(t, string(graph.Body), "wrote the first program")
	})
}

// TestMemoryServerThroughMCP: the same server through idemgate's own /mcp: the upstream's
// input schema (with operation_key), its annotations but idempotentHint, and its results
// as they came, with the operation in _meta; a replay answers the recorded result byte for
// byte and performs nothing; the same key with other arguments is refused. Both engines.
func TestMemoryServerThroughMCP(t *testing.T) {
	t.Parallel()
	server := npmServer(t, "mcp-server-memory")
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		file := filepath.Join(t.TempDir(), "memory.jsonl")
		tools := strings.NewReplacer("{{SERVER}}", server, "{{FILE}}", file).Replace(memoryTools)
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: tools})
		s := mcpSession(t, g, g.Key)

		listed := map[string]*mcp.Tool{}
		for tool, err := range s.Tools(t.Context(), nil) {
			require.NoError(t, err)
			listed[tool.Meta["idemgate/tool"].(string)] = tool // listed as memory__create_entities
		}
		create := listed["memory.create_entities"]
		require.NotNil(t, create, "listed: %v", maps.Keys(listed))
		schema := jsonMap(t, create.InputSchema)
		props := schema["properties"].(map[string]any)
		assert.Contains(t, props, "entities", "the upstream's input schema")
		assert.Contains(t, props, "operation_key", "idemgate's addition")
		assert.Contains(t, schema["required"], "operation_key")
		require.NotNil(t, create.Annotations)
		assert.True(t, create.Annotations.IdempotentHint, "a repeat with the same key has no further effect")
		assert.False(t, create.Annotations.ReadOnlyHint)
		require.NotNil(t, listed["memory.read_graph"].Annotations)
		assert.True(t, listed["memory.read_graph"].Annotations.ReadOnlyHint, "the upstream's hint")

		args := map[string]any{"entities": []any{map[string]any{"name": "Ada", "entityType": "person", "observations": []any{"wrote the first program"}}},
			"operation_key": "remember-ada"}
		first := callTool(t, s, "memory.create_entities", "", args)
		require.False(t, first.IsError, "%s", resultText(first))
		op, ok := first.Meta["idemgate/operation"].(map[string]any)
		require.True(t, ok, "the operation in _meta: %v", first.Meta)
		assert.Equal(t, "SUCCEEDED", op["state"])
		assert.Equal(t, false, op["replayed"])
		assert.Contains(t, jsonText(t, first.StructuredContent), "Ada", "the upstream's structured content")
		assert.Equal(t, 1, entityCount(t, file, "Ada"))

		again := callTool(t, s, "memory.create_entities", "", args)
		assert.Equal(t, true, again.Meta["idemgate/operation"].(map[string]any)["replayed"])
		assert.Equal(t, jsonText(t, first.Content), jsonText(t, again.Content), "the recorded result, byte for byte")
		assert.Equal(t, jsonText(t, first.StructuredContent), jsonText(t, again.StructuredContent))
		assert.Equal(t, 1, entityCount(t, file, "Ada"), "a replay performs nothing")

		args["entities"] = []any{map[string]any{"name": "Grace", "entityType": "person", "observations": []any{}}}
		mismatch := callTool(t, s, "memory.create_entities", "", args)
		assert.True(t, mismatch.IsError)
		assert.Nil(t, mismatch.StructuredContent, "no idemgate object where the upstream's outputSchema applies")
		assert.Equal(t, "idempotency-key-mismatch", mismatch.Meta["idemgate/problem"], "%s", resultText(mismatch))
		assert.Equal(t, 0, entityCount(t, file, "Grace"))

		graph := callTool(t, s, "memory.read_graph", "", map[string]any{})
		require.False(t, graph.IsError, "%s", resultText(graph))
		assert.Contains(t, jsonText(t, graph.StructuredContent), "wrote the first program")
	})
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func jsonMap(t *testing.T, v any) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(jsonText(t, v)), &m))
	return m
}

// TestConsoleShowsAnMCPOperation: the console shows an operation of an MCP server's tool like
// any other, naming the server and the upstream tool it calls. Both engines.
func TestConsoleShowsAnMCPOperation(t *testing.T) {
	t.Parallel()
	server := npmServer(t, "mcp-server-memory")
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		file := filepath.Join(t.TempDir(), "memory.jsonl")
		c := consoletest.Start(t, d, consoletest.Options{
			MCPServers: strings.NewReplacer("{{SERVER}}", server, "{{FILE}}", file).Replace(memoryTools)})
		op := c.Operation(t, consoletest.Seed{Tenant: "acme", Key: "remember-ada", Tool: "memory.create_entities",
			Params: `{"entities":[{"entityType":"person","name":"Ada","observations":[]}]}`, Unknown: true, Review: true})
		password := c.User(t, "reviewer@example.test", models.RoleReviewer)
		b := c.NewBrowser(t)
		b.MustLogin(t, "reviewer@example.test", password)
		page := b.Get(t, "/operations/"+op.ID)
		require.Equal(t, http.StatusOK, page.Status, page.Body)
		assert.Contains(t, page.TestIDs("operation-downstream")[0], "MCP server memory, tool create_entities")
		assert.Contains(t, page.Body, "memory.create_entities")
		queue := b.Get(t, "/reviews")
		assert.Contains(t, queue.Body, "remember-ada")
	})
}
