package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An agent's MCP client that speaks tasks (the 2026-07-28 extension) asks for a payout that
// needs a reviewer: it gets a task, and tasks/get says it waits for a reviewer's approval. Rita
// finds the payout in the console from the task's id (the operation's), approves it through
// the real form, and the task completes with exactly the result a plain call with the same key
// answers; the payout ran once at the downstream. Both engines.
func TestBrowserApprovingAnMCPTask(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	run(t, ctx, chromedp.Navigate("about:blank")) // the browser starts here; each engine gets a context of its own
	for _, d := range []models.Dialect{models.Postgres, models.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			con := consoletest.Start(t, d, consoletest.Options{Downstream: true})
			con.Tenant(t, "acme")
			key, err := con.Ledger.CreateAPIKey(t.Context(), models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent", nil)
			require.NoError(t, err)
			pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
			agent := mcpAgent{t: t, url: con.URL + "/mcp", key: key.Secret}

			payout := `{"name":"payments__payout","arguments":{"order_id":"o-7","amount_cents":250000,"currency":"EUR",` +
				`"operation_key":"payout-1"},"_meta":` + agent.meta(true) + `}`
			created := agent.result("tools/call", payout)
			require.Equal(t, "task", created["resultType"], "a call that waits for a reviewer answers a task: %v", created)
			id := created["taskId"].(string)
			waiting := agent.result("tasks/get", agent.task(id))
			assert.Equal(t, "working", waiting["status"])
			assert.Contains(t, waiting["statusMessage"], "reviewer's approval")
			assert.Zero(t, con.Sandbox.Committed("refunds"), "nothing is paid before the approval")

			tab, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
			defer cancel()
			signIn(t, tab, con.URL+"/login?next=%2Foperations%2F"+id, "rita@example.com", pw)
			run(t, tab, chromedp.WaitVisible(testID("action-open-approve")))
			assert.Equal(t, "Awaiting approval", value(t, tab, chromedp.Text(stateBadge)))
			decide(t, tab, models.ActionApprove, "Invoice 7 matches the order.")
			assert.Contains(t, value(t, tab, chromedp.Text(testID("notice"))), "Approved")

			var done map[string]any
			deadline := time.Now().Add(15 * time.Second)
			for {
				done = agent.result("tasks/get", agent.task(id))
				if done["status"] != "working" || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			require.Equal(t, "completed", done["status"], "%v", done)

			plain := agent.result("tools/call", strings.Replace(payout, agent.meta(true), agent.meta(false), 1))
			// The revision's own members are the envelope of a tools/call answer, not its result.
			delete(plain, "resultType")
			meta := plain["_meta"].(map[string]any)
			for k := range meta {
				if strings.HasPrefix(k, "io.modelcontextprotocol/") {
					delete(meta, k)
				}
			}
			assert.Equal(t, plain, done["result"], "the task's result is what a plain call answers")
			assert.Equal(t, 1, con.Sandbox.Committed("refunds"), "the payout ran once")
			run(t, tab, chromedp.Reload(), chromedp.WaitVisible(stateBadge))
			assert.Equal(t, "Succeeded", value(t, tab, chromedp.Text(stateBadge)))
		})
	}
}

// mcpAgent sends JSON-RPC requests of the 2026-07-28 revision to /mcp, as an agent's client
// does.
type mcpAgent struct {
	t   *testing.T
	url string
	key string
}

// meta is a request's _meta: the revision, and the Tasks extension when tasks is set.
func (a mcpAgent) meta(tasks bool) string {
	ext := `{}`
	if tasks {
		ext = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	}
	return `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + ext + `}`
}

func (a mcpAgent) task(id string) string {
	return `{"taskId":"` + id + `","_meta":` + a.meta(true) + `}`
}

// result sends method with params and returns its result.
func (a mcpAgent) result(method, params string) map[string]any {
	a.t.Helper()
	var p struct {
		Name   string `json:"name"`
		TaskID string `json:"taskId"`
	}
	require.NoError(a.t, json.Unmarshal([]byte(params), &p))
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, a.url,
		bytes.NewBufferString(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`))
	require.NoError(a.t, err)
	req.Header.Set("Authorization", "Bearer "+a.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", p.Name+p.TaskID)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	require.Equal(a.t, http.StatusOK, resp.StatusCode, "%s", body)
	var m struct {
		Result map[string]any `json:"result"`
	}
	require.NoError(a.t, json.Unmarshal(body, &m), "%s", body)
	require.NotNil(a.t, m.Result, "a result: %s", body)
	return m.Result
}
