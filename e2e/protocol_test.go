package e2e

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/idemgate/idemgate/web"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

var mcpAccept = map[string]string{"Accept": "application/json, text/event-stream"}

func withHeaders(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// Every 401 names the scheme (RFC 9110 §15.5.2), and a key that is sent but unknown says so
// (RFC 6750 §3), on the API and on /mcp alike.
func TestUnauthenticatedAnswersNameTheScheme(t *testing.T) {
	t.Parallel()
	g := gatewaytest.Start(t, models.SQLite)
	for _, path := range []string{"/v1/operations", "/mcp"} {
		none := g.Do(t, http.MethodPost, path, "", mcpAccept, mcpInitialize)
		require.Equal(t, http.StatusUnauthorized, none.Status, path)
		assert.Equal(t, `Bearer realm="idemgate"`, none.Header.Get("WWW-Authenticate"), path)
		bad := g.Do(t, http.MethodPost, path, "idg_"+strings.Repeat("A", 43), mcpAccept, mcpInitialize)
		require.Equal(t, http.StatusUnauthorized, bad.Status, path)
		assert.True(t, strings.HasPrefix(bad.Header.Get("WWW-Authenticate"), `Bearer realm="idemgate", error="invalid_token"`),
			"%s: %q", path, bad.Header.Get("WWW-Authenticate"))
	}
	lower := g.Do(t, http.MethodGet, "/v1/tools", "", map[string]string{"Authorization": "bearer " + g.Key}, "")
	assert.Equal(t, http.StatusOK, lower.Status, "the scheme's name is case-insensitive")
}

// A body declared as anything but JSON is refused before it is read: nothing recorded, nothing
// sent downstream.
func TestSubmitRefusesBodiesThatAreNotJSON(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		g := gatewaytest.Start(t, d)
		body := `{"tool":"tickets.create","params":{"subject":"Printer on fire"}}`
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
			r := g.Submit(t, "ct-1", "tickets.create", `{"subject":"Printer on fire"}`, map[string]string{"Content-Type": ct})
			assert.Equal(t, http.StatusUnsupportedMediaType, r.Status, ct)
			assert.Contains(t, string(r.Body), "unsupported-media-type", ct)
		}
		assert.Zero(t, g.Count(t), "nothing was recorded")
		assert.Zero(t, g.Sandbox.Committed("tickets"), "nothing was sent")
		for _, ct := range []string{"application/json; charset=utf-8", "application/vnd.api+json"} {
			r := g.Do(t, http.MethodPost, "/v1/operations", g.Key, map[string]string{"Content-Type": ct, "Idempotency-Key": "ct-" + ct}, body)
			assert.Equal(t, http.StatusCreated, r.Status, ct)
		}
	})
}

// /mcp refuses a browser page of another site (the MCP transport's DNS-rebinding rule), and
// takes the gateway's own origins: those it is told to allow, a loopback page on a loopback
// Host, and, behind a trusted proxy, the origin the proxy was reached at.
func TestMCPOrigin(t *testing.T) {
	t.Parallel()
	direct := gatewaytest.StartWith(t, models.SQLite, gatewaytest.Options{AllowedOrigins: web.AllowedOrigins{"https://app.example.com"}})
	call := func(g *gatewaytest.Gateway, host string, header map[string]string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, g.URL+"/mcp", strings.NewReader(mcpInitialize))
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		req.Header.Set("Authorization", "Bearer "+g.Key)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range withHeaders(mcpAccept, flatten(header)...) {
			req.Header.Set(k, v)
		}
		res, err := g.Client.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	for origin, want := range map[string]int{
		"https://evil.example":            http.StatusForbidden,
		"null":                            http.StatusForbidden,
		"http://localhost.evil.example":   http.StatusForbidden,
		direct.URL:                        http.StatusOK,
		"http://localhost:3000":           http.StatusOK, // a loopback page, reaching a loopback Host
		"https://app.example.com":         http.StatusOK,
		"https://APP.example.com:443":     http.StatusOK,
		"https://app.example.com.evil.io": http.StatusForbidden,
	} {
		assert.Equal(t, want, call(direct, "", map[string]string{"Origin": origin}), origin)
	}
	assert.Equal(t, http.StatusForbidden, call(direct, "evil.example.com", map[string]string{"Origin": "http://evil.example.com"}),
		"a rebinding page's Host and Origin agree, and are still not the gateway's")
	assert.Equal(t, http.StatusOK, call(direct, "evil.example.com", nil), "no Origin: not a browser")

	proxied := gatewaytest.StartWith(t, models.SQLite, gatewaytest.Options{
		TrustedProxies: web.TrustedProxies{netip.MustParsePrefix("127.0.0.1/32")}})
	behind := map[string]string{"Origin": "https://gateway.example.com", "X-Forwarded-Host": "gateway.example.com", "X-Forwarded-Proto": "https"}
	assert.Equal(t, http.StatusOK, call(proxied, "", behind), "behind a trusted proxy, the origin the proxy was reached at")
	behind["Origin"] = "https://evil.example.com"
	assert.Equal(t, http.StatusForbidden, call(proxied, "", behind))
}

func flatten(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k, v)
	}
	return out
}

// Every method counts against the principal's rate limit, not only tools/call, and a batch is
// bounded before the SDK reads it.
func TestMCPMethodsAreRateLimited(t *testing.T) {
	t.Parallel()
	g := gatewaytest.StartWith(t, models.SQLite, gatewaytest.Options{RateLimit: 0.001, RateBurst: 3})
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	limited := 0
	for range 5 {
		r := g.Do(t, http.MethodPost, "/mcp", g.Key, mcpAccept, list)
		require.Equal(t, http.StatusOK, r.Status)
		if strings.Contains(string(r.Body), "rate limited") {
			limited++
		}
	}
	assert.Equal(t, 2, limited, "a burst of 3, then refusals")
}

// The NUL character, which PostgreSQL cannot store, is refused with 400 wherever input comes
// in, before the ledger sees it, on both engines alike: never a 503 on demand.
func TestNULIsRefusedBeforeTheLedger(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		g := gatewaytest.Start(t, d)
		for name, body := range map[string]string{
			"workflow_run_id": `{"tool":"tickets.create","params":{"subject":"x"},"workflow_run_id":"wf\u0000"}`,
			"step_id":         `{"tool":"tickets.create","params":{"subject":"x"},"step_id":"s\u0000"}`,
			"a param":         `{"tool":"tickets.create","params":{"subject":"x\u0000y"}}`,
			"a param's name":  `{"tool":"tickets.create","params":{"subject":"x","a\u0000":1}}`,
		} {
			r := g.Do(t, http.MethodPost, "/v1/operations", g.Key, map[string]string{"Idempotency-Key": "nul-" + name}, body)
			assert.Equal(t, http.StatusBadRequest, r.Status, name)
			assert.Contains(t, string(r.Body), "NUL", name)
		}
		for _, path := range []string{"/v1/operations?workflow_run_id=wf%00", "/v1/operations/op_%00", "/v1/operation-keys/k%00"} {
			r := g.Do(t, http.MethodGet, path, g.Key, nil, "")
			assert.Equal(t, http.StatusBadRequest, r.Status, path)
		}
		call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"tickets.create","arguments":{"operation_key":"nul-mcp","subject":"x\u0000"}}}`
		r := g.Do(t, http.MethodPost, "/mcp", g.Key, mcpAccept, call)
		require.Equal(t, http.StatusOK, r.Status)
		assert.Contains(t, string(r.Body), "NUL")
		assert.Contains(t, string(r.Body), `"isError":true`)
		assert.Zero(t, g.Count(t), "nothing was recorded")
		assert.Zero(t, g.Sandbox.Committed("tickets"))
		// The ledger still answers: nothing failed on the way.
		assert.Equal(t, http.StatusOK, g.Do(t, http.MethodGet, "/v1/operations?workflow_run_id=wf", g.Key, nil, "").Status)
	})
}

// An agent's justification is kept with the operation, masked of the call's sensitive values;
// it is not part of the fingerprint, so a retry that words it otherwise still replays, and the
// first one stays. MCP callers give it in _meta.
func TestJustification(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		g := gatewaytest.Start(t, d)
		card := "4242424242424242"
		body := func(why string) string {
			return `{"tool":"refunds.issue","params":{"order_id":"o-1","amount_cents":1999,"currency":"EUR","card_number":"` + card +
				`"},"justification":"` + why + `"}`
		}
		first := g.Do(t, http.MethodPost, "/v1/operations", g.Key, map[string]string{"Idempotency-Key": "why-1"},
			body("The customer was charged twice on card "+card+"; chat 5512."))
		require.Equal(t, http.StatusCreated, first.Status, string(first.Body))
		assert.Contains(t, string(first.Body), `"justification":"The customer was charged twice on card ***; chat 5512."`)
		assert.NotContains(t, string(first.Body), "42424242")
		again := g.Do(t, http.MethodPost, "/v1/operations", g.Key, map[string]string{"Idempotency-Key": "why-1"},
			body("Refunding the double charge (chat 5512)."))
		require.Equal(t, http.StatusOK, again.Status, "another wording is the same call: a replay")
		assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		assert.Contains(t, string(again.Body), "charged twice", "the first justification is kept")
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"))

		long := g.Do(t, http.MethodPost, "/v1/operations", g.Key, map[string]string{"Idempotency-Key": "why-2"},
			body(strings.Repeat("é", 2001)))
		assert.Equal(t, http.StatusBadRequest, long.Status)

		call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"tickets.create","arguments":{"subject":"Printer"},` +
			`"_meta":{"idemgate/key":"why-mcp","idemgate/justification":"The printer is on fire."}}}`
		r := g.Do(t, http.MethodPost, "/mcp", g.Key, mcpAccept, call)
		require.Equal(t, http.StatusOK, r.Status)
		op := g.Do(t, http.MethodGet, "/v1/operations?key=why-mcp", g.Key, nil, "")
		require.Equal(t, http.StatusOK, op.Status)
		assert.Contains(t, string(op.Body), `"justification":"The printer is on fire."`)

		// On /mcp the same bound as on the JSON API: 2,000 characters, not bytes.
		reason := strings.Repeat("é", 2000)
		mcpCall := func(id int, key, reason string) gatewaytest.Response {
			return g.Do(t, http.MethodPost, "/mcp", g.Key, mcpAccept, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call",`+
				`"params":{"name":"tickets.create","arguments":{"subject":"Printer"},"_meta":{"idemgate/key":%q,"idemgate/justification":%q}}}`, id, key, reason))
		}
		r = mcpCall(4, "why-mcp-long", reason)
		require.Equal(t, http.StatusOK, r.Status)
		assert.NotContains(t, string(r.Body), "at most", "2,000 characters are taken: %s", r.Body)
		op = g.Do(t, http.MethodGet, "/v1/operations?key=why-mcp-long", g.Key, nil, "")
		assert.Contains(t, string(op.Body), reason)
		r = mcpCall(5, "why-mcp-longer", reason+"é")
		assert.Contains(t, string(r.Body), "at most 2000 characters")
		none := g.Submit(t, "why-none", "tickets.create", `{"subject":"x"}`, nil)
		assert.Contains(t, string(none.Body), `"justification":null`)
	})
}
