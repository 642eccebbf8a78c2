package e2e_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
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
