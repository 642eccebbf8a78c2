package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Parameters used across the suite.
const (
	refundParams = `{"order_id":"o-1042","amount_cents":1999,"currency":"EUR"}`
	ticketParams = `{"subject":"Printer on fire"}`
	payoutParams = `{"order_id":"o-7","amount_cents":50000,"currency":"EUR"}`
	card         = "4242424242424242"
)

// operationMembers are the members of the operation object of docs/API.md, all of them always
// present.
var operationMembers = []string{
	"id", "key", "tool", "state", "fingerprint", "params", "result", "error", "downstream_ref", "downstream_key",
	"attempts", "next_attempt_at", "review", "compensates", "compensated_by", "workflow_run_id",
	"step_id", "justification", "policy", "created_at", "updated_at", "completed_at",
}

// submitAs posts an operation with the API key apiKey (none when "").
func submitAs(t testing.TB, g *gatewaytest.Gateway, apiKey, idemKey, tool, params string, header map[string]string) gatewaytest.Response {
	t.Helper()
	h := map[string]string{"Idempotency-Key": idemKey}
	for k, v := range header {
		h[k] = v
	}
	return g.Do(t, http.MethodPost, "/v1/operations", apiKey, h, `{"tool":"`+tool+`","params":`+params+`}`)
}

// send sends a request whose headers are given in full (several values per name allowed).
func send(t testing.TB, g *gatewaytest.Gateway, method, path string, header http.Header, body []byte) gatewaytest.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, g.URL+path, rd)
	require.NoError(t, err)
	req.Header = header.Clone()
	resp, err := g.Client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return gatewaytest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// requireOp checks that r is an operation answer with status and returns the operation.
func requireOp(t testing.TB, r gatewaytest.Response, status int) map[string]any {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	assert.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"), "Content-Type %q", r.Header.Get("Content-Type"))
	op := r.JSON(t)
	for _, m := range operationMembers {
		assert.Contains(t, op, m, "operation lacks member %q", m)
	}
	assert.Len(t, op, len(operationMembers), "operation has unexpected members: %s", r.Body)
	return op
}

// requireReplay checks a 200 replay of the operation answered first.
func requireReplay(t testing.TB, r gatewaytest.Response, first gatewaytest.Response) map[string]any {
	t.Helper()
	op := requireOp(t, r, http.StatusOK)
	assert.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
	assert.JSONEq(t, string(first.Body), string(r.Body), "a replay must carry the recorded operation")
	return op
}

var (
	pagesMu   sync.Mutex
	pagesSeen = map[string]bool{}
)

// requireProblem checks that r is an RFC 9457 problem of type /problems/<slug> with status,
// that the gateway serves the HTML page its type names, and returns its members.
func requireProblem(t testing.TB, g *gatewaytest.Gateway, r gatewaytest.Response, status int, slug string) map[string]any {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	assert.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
	p := r.JSON(t)
	require.Equal(t, "/problems/"+slug, p["type"], "body: %s", r.Body)
	assert.EqualValues(t, status, p["status"])
	assert.NotEmpty(t, p["title"])
	assert.NotEmpty(t, p["detail"])
	requireProblemPage(t, g, p["type"].(string))
	return p
}

// requireProblemPage checks that the gateway serves an HTML page at a problem's type, once per
// type for the whole run.
func requireProblemPage(t testing.TB, g *gatewaytest.Gateway, typ string) {
	t.Helper()
	require.True(t, strings.HasPrefix(typ, "/problems/"), "problem type %q", typ)
	pagesMu.Lock()
	seen := pagesSeen[typ]
	pagesSeen[typ] = true
	pagesMu.Unlock()
	if seen {
		return
	}
	r := g.Do(t, http.MethodGet, typ, "", map[string]string{"Accept": "text/html"}, "")
	require.Equal(t, http.StatusOK, r.Status, "GET %s: %s", typ, r.Body)
	assert.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "text/html"), "GET %s: Content-Type %q", typ, r.Header.Get("Content-Type"))
	assert.Contains(t, strings.ToLower(string(r.Body)), "<html")
}

// requireOperationProblem checks the members every problem about an existing operation has.
func requireOperationProblem(t testing.TB, p map[string]any, id, state string) {
	t.Helper()
	assert.Equal(t, id, p["operation_id"])
	assert.Equal(t, state, p["state"])
	assert.Equal(t, false, p["safe_to_retry_with_new_key"], "safe_to_retry_with_new_key must be present and false")
}

// getOp reads an operation by id with apiKey.
func getOp(t testing.TB, g *gatewaytest.Gateway, apiKey, id string) gatewaytest.Response {
	t.Helper()
	return g.Do(t, http.MethodGet, "/v1/operations/"+id, apiKey, nil, "")
}

// waitState polls the operation until it reaches state, and returns it.
func waitState(t testing.TB, g *gatewaytest.Gateway, id, state string, timeout time.Duration) map[string]any {
	t.Helper()
	var op map[string]any
	gatewaytest.Eventually(t, timeout, id+" to become "+state, func() bool {
		r := getOp(t, g, g.Key, id)
		if r.Status != http.StatusOK {
			return false
		}
		op = r.JSON(t)
		return op["state"] == state
	})
	return op
}

// events reads an operation's timeline.
func events(t testing.TB, g *gatewaytest.Gateway, apiKey, id string) []map[string]any {
	t.Helper()
	r := g.Do(t, http.MethodGet, "/v1/operations/"+id+"/events", apiKey, nil, "")
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	var body struct {
		Events []map[string]any `json:"events"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &body))
	return body.Events
}

// eventTypes lists the types of evs in order.
func eventTypes(evs []map[string]any) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		s, _ := e["type"].(string)
		out = append(out, s)
	}
	return out
}

// errorMember returns the operation's error object (nil when null).
func errorMember(t testing.TB, op map[string]any) map[string]any {
	t.Helper()
	e, _ := op["error"].(map[string]any)
	return e
}
