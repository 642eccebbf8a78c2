package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpstreamTaskTool: server-everything's simulate-research-query can be called only as an
// MCP task (execution.taskSupport "required"; 2025-11-25's tasks utility). Through the gateway
// it is a tool like any other: one call, one upstream task per operation, the report as its
// result; a repeat of the key (after it ended, or at the same time as the first) is answered
// from the ledger and starts no second task. The task's id, the operation's downstream_ref,
// tells the tasks apart. Over stdio and Streamable HTTP, both engines.
func TestUpstreamTaskTool(t *testing.T) {
	t.Parallel()
	bin := npmServer(t, "mcp-server-everything")
	transports := map[string]func(t *testing.T) string{
		"stdio": func(*testing.T) string { return fmt.Sprintf("    command: [%q, stdio]\n", bin) },
		"http":  func(t *testing.T) string { return "    url: " + everythingServer(t) + "\n" },
	}
	for name, server := range transports {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			entry := server(t)
			testdb.Each(t, func(t *testing.T, d models.Dialect) {
				g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: "mcp_servers:\n  - name: everything\n" + entry})
				const tool = "everything.simulate-research-query"

				first := researchTask(t, g, "research-1", "tides")
				again := researchTask(t, g, "research-1", "tides")
				assert.Equal(t, first.task, again.task, "a repeat of the key is answered from the ledger: no second task")
				assert.Equal(t, first.op, again.op)

				// Two at once under a new key: one operation, one task, and not the first one's.
				var wg sync.WaitGroup
				both := make([]research, 2)
				for i := range both {
					wg.Go(func() { both[i] = researchTask(t, g, "research-2", "currents") })
				}
				wg.Wait()
				assert.Equal(t, both[0].task, both[1].task, "concurrent duplicates share one upstream task")
				assert.NotEqual(t, first.task, both[0].task, "a new key is a new task")

				for _, op := range []string{first.op, both[0].op} {
					r := g.Do(t, http.MethodGet, "/v1/operations/"+op, g.Key, nil, "")
					require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
					var got struct {
						Attempts int `json:"attempts"`
					}
					require.NoError(t, json.Unmarshal(r.Body, &got))
					assert.Equal(t, 1, got.Attempts, "%s: one attempt, one tools/call", tool)
				}
			})
		})
	}
}

type research struct{ op, task string }

// researchTask submits simulate-research-query under key and waits for its outcome: the
// operation and the upstream task its result names.
func researchTask(t *testing.T, g *gatewaytest.Gateway, key, topic string) research {
	t.Helper()
	r := g.Submit(t, key, "everything.simulate-research-query", `{"topic":"`+topic+`"}`, map[string]string{"Prefer": "wait=30"})
	require.Contains(t, []int{http.StatusOK, http.StatusCreated}, r.Status, "%s", r.Body)
	var op struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Ref    string `json:"downstream_ref"`
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &op), "%s", r.Body)
	require.Equal(t, "SUCCEEDED", op.State, "%s", r.Body)
	require.NotEmpty(t, op.Result.Content, "%s", r.Body)
	assert.Contains(t, op.Result.Content[0].Text, "# Research Report: "+topic)
	require.NotEmpty(t, op.Ref, "the operation names its upstream task: %s", r.Body)
	return research{op: op.ID, task: op.Ref}
}

// TestUpstreamTaskPastTheTimeout: a task still working when the call's timeout passes was sent
// and may yet have its effect: the attempt is ambiguous (UNKNOWN for a tool not safe to
// retry), never "not sent", and its message names the upstream task for whoever settles it.
func TestUpstreamTaskPastTheTimeout(t *testing.T) {
	t.Parallel()
	bin := npmServer(t, "mcp-server-everything")
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: fmt.Sprintf(
			"mcp_servers:\n  - name: everything\n    command: [%q, stdio]\n    timeout: 1s\n", bin)})
		r := g.Submit(t, "research-slow", "everything.simulate-research-query", `{"topic":"tides"}`, map[string]string{"Prefer": "wait=10"})
		var op struct {
			State string `json:"state"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &op), "%s", r.Body)
		assert.Equal(t, "UNKNOWN", op.State, "%s", r.Body)
		assert.Regexp(t, `upstream task \S+: still working after the call's timeout`, string(r.Body))
	})
}
