package e2e_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// everythingServer starts @modelcontextprotocol/server-everything over Streamable HTTP on a
// free loopback port and returns its endpoint.
func everythingServer(t *testing.T) string {
	t.Helper()
	bin := npmServer(t, "mcp-server-everything")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "streamableHttp")
	cmd.Env = append(cmd.Environ(), fmt.Sprintf("PORT=%d", port))
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				close(ready)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything did not start")
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

// everythingCalls are the arguments each of server-everything's tools is called with. The
// tools it registers once a session is initialised (they ask the client for sampling,
// elicitation or roots, which idemgate's client does not offer its upstreams, or run as tasks:
// simulate-research-query has a test of its own, TestUpstreamTaskTool) are left out; the gzip tool
// fetches a URL from the internet, which this machine cannot reach, so it is compared by its
// listing alone.
var everythingCalls = map[string]map[string]any{
	"echo":                           {"message": "hello through the gateway"},
	"get-sum":                        {"a": 2, "b": 40},
	"get-tiny-image":                 {},
	"get-annotated-message":          {"messageType": "error", "includeImage": true},
	"get-resource-links":             {"count": 3},
	"get-resource-reference":         {"resourceType": "Text", "resourceId": 2},
	"get-structured-content":         {"location": "Chicago"},
	"get-env":                        {},
	"toggle-simulated-logging":       {},
	"toggle-subscriber-updates":      {},
	"trigger-long-running-operation": {"duration": 1, "steps": 2},
}

// TestEverythingServerLooksTheSameThroughTheGateway: for each tool of server-everything over
// Streamable HTTP, what a client sees through idemgate's /mcp equals what it sees directly,
// apart from idemgate's additions (the tool's name prefix, operation_key, idempotentHint, the
// operation in _meta): listing (title, description, input and output schemas, annotations)
// and the result of a call (text, image, audio, resource links, embedded resources,
// structuredContent, isError). Both engines.
func TestEverythingServerLooksTheSameThroughTheGateway(t *testing.T) {
	t.Parallel()
	endpoint := everythingServer(t)
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: "mcp_servers:\n  - name: everything\n    url: " + endpoint + "\n"})
		direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = direct.Close() })
		via := mcpSession(t, g, g.Key)

		viaTools := map[string]*mcp.Tool{}
		for tool, err := range via.Tools(t.Context(), nil) {
			require.NoError(t, err)
			viaTools[tool.Meta["idemgate/tool"].(string)] = tool // listed as everything__echo, its own name everything.echo
		}
		var seen []string
		for up, err := range direct.Tools(t.Context(), nil) {
			require.NoError(t, err)
			if _, static := everythingCalls[up.Name]; !static && up.Name != "gzip-file-as-resource" {
				continue // registered after initialisation for a client's capabilities
			}
			seen = append(seen, up.Name)
			tool := viaTools["everything."+up.Name]
			require.NotNil(t, tool, "through the gateway: %v", slices.Sorted(maps.Keys(viaTools)))
			assert.Equal(t, cmp.Or(up.Title, "everything."+up.Name), tool.Title, up.Name)
			assert.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, tool.Name)
			assert.Equal(t, up.Description, tool.Description, up.Name)
			assert.JSONEq(t, jsonText(t, up.OutputSchema), jsonText(t, tool.OutputSchema), up.Name)
			wantAnn, gotAnn := *up.Annotations, *tool.Annotations
			assert.True(t, gotAnn.IdempotentHint, "through the gateway a repeat with the same key has no effect")
			assert.JSONEq(t, jsonText(t, up.Annotations), jsonText(t, tool.Meta["idemgate/upstream_annotations"]), "the server's own hints, kept: %s", up.Name)
			// Through the gateway readOnlyHint and destructiveHint say the tool's effect there.
			wantAnn.IdempotentHint, gotAnn.IdempotentHint = false, false
			wantAnn.ReadOnlyHint, gotAnn.ReadOnlyHint = false, false
			wantAnn.DestructiveHint, gotAnn.DestructiveHint = nil, nil
			assert.Equal(t, jsonText(t, wantAnn), jsonText(t, gotAnn), up.Name)
			assert.JSONEq(t, jsonText(t, up.InputSchema), jsonText(t, withoutKey(t, tool.InputSchema)), up.Name)

			args, ok := everythingCalls[up.Name]
			if !ok {
				continue
			}
			want, err := direct.CallTool(t.Context(), &mcp.CallToolParams{Name: up.Name, Arguments: args})
			require.NoError(t, err, up.Name)
			viaArgs := maps.Clone(args)
			viaArgs["operation_key"] = "everything-" + up.Name
			got, err := via.CallTool(t.Context(), &mcp.CallToolParams{Name: tool.Name, Arguments: viaArgs})
			require.NoError(t, err, up.Name)
			assert.Equal(t, want.IsError, got.IsError, "%s: %s", up.Name, resultText(got))
			// The toggles name the session they were toggled for: the client's own, and the
			// gateway's with the server.
			assert.JSONEq(t, sessionless(jsonText(t, want.Content)), sessionless(jsonText(t, got.Content)), up.Name)
			assert.JSONEq(t, jsonText(t, want.StructuredContent), jsonText(t, got.StructuredContent), up.Name)
			op, ok := got.Meta["idemgate/operation"].(map[string]any)
			require.True(t, ok, "%s: the operation in _meta: %v", up.Name, got.Meta)
			assert.Equal(t, "SUCCEEDED", op["state"], up.Name)
		}
		assert.Len(t, seen, len(everythingCalls)+1, "every static tool was compared: %v", seen)
	})
}

var sessionID = regexp.MustCompile(`session [0-9a-f-]{36}`)

func sessionless(s string) string {
	return createdAt.ReplaceAllString(sessionID.ReplaceAllString(s, "session <id>"), "created at <time>")
}

// createdAt is the clock time the server writes into the resources it makes up on each call
// (get-resource-reference): a second apart, the direct call and the gateway's differ there
// alone.
var createdAt = regexp.MustCompile(`created at \d{1,2}:\d{2}(:\d{2})?[\s\x{202f}]*([AP]M)?`)

// withoutKey is a tools/list input schema without idemgate's operation_key.
func withoutKey(t *testing.T, schema any) map[string]any {
	t.Helper()
	m := jsonMap(t, schema)
	if props, ok := m["properties"].(map[string]any); ok {
		delete(props, "operation_key")
	}
	if req, ok := m["required"].([]any); ok {
		req = slices.DeleteFunc(req, func(v any) bool { return v == "operation_key" })
		if len(req) == 0 {
			delete(m, "required")
		} else {
			m["required"] = req
		}
	}
	return m
}
