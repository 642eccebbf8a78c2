package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seen is one request a fake downstream received.
type seen struct {
	Method, Path, Query string
	Header              http.Header
	Body                string
}

// fakeDownstream records every request and answers with handle.
type fakeDownstream struct {
	mu     sync.Mutex
	reqs   []seen
	handle func(w http.ResponseWriter, r *http.Request, body []byte)
}

func (f *fakeDownstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, seen{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: string(body)})
	f.mu.Unlock()
	f.handle(w, r, body)
}

func (f *fakeDownstream) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

func startDownstream(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, body []byte)) (*fakeDownstream, string) {
	f := &fakeDownstream{handle: handle}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// startWithTools runs a gateway whose tools file is tools with {{DOWN}} replaced by down.
func startWithTools(t *testing.T, d models.Dialect, tools, down string, opts gatewaytest.Options) *gatewaytest.Gateway {
	t.Helper()
	opts.Catalog = func(string) (*catalog.Catalog, error) {
		return catalog.Load([]byte(strings.ReplaceAll(tools, "{{DOWN}}", down)))
	}
	return gatewaytest.StartWith(t, d, opts)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// dropConnection closes the connection without an answer, after the request was read.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

const tenantTools = `
connections:
  - name: payments
    base_url: {{DOWN}}
    auth: {header: {name: X-Api-Key, value: {tenant: payments_key}}}
tools:
  - name: payments.create
    description: Create a payment
    effect: write
    params_schema: {type: object, required: [amount], properties: {amount: {type: integer}}}
    http: {connection: payments, method: POST, url: /v1/payments, idempotency_header: Idempotency-Key}
`

// TestTenantSecretsPerTenant: each tenant's calls carry its own key; a tenant without one is
// refused 422 connection-not-configured with nothing recorded and nothing sent; a key already
// recorded still replays after the secret is gone, and an attempt that finds its secret gone
// is not sent.
func TestTenantSecretsPerTenant(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		down, url := startDownstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			writeJSON(w, http.StatusCreated, map[string]string{"id": "pay_1", "key_seen": r.Header.Get("X-Api-Key")})
		})
		keys, err := datakey.Parse(datakey.Generate(), "")
		require.NoError(t, err)
		g := startWithTools(t, d, tenantTools, url, gatewaytest.Options{DataKeys: keys})
		ctx := context.Background()
		globex := g.NewTenant(t, "globex", "agent", nil)
		initech := g.NewTenant(t, "initech", "agent", nil)
		cli := models.Requester{Actor: models.ActorCLI}
		require.NoError(t, g.Ledger.SetTenantSecret(ctx, models.AllTenants(), cli, "acme", "payments_key", "acme-secret-111"))
		require.NoError(t, g.Ledger.SetTenantSecret(ctx, models.AllTenants(), cli, "globex", "payments_key", "globex-secret-222"))

		a := requireOp(t, submitAs(t, g, g.Key, "pay-1", "payments.create", `{"amount":5}`, nil), http.StatusCreated)
		b := requireOp(t, submitAs(t, g, globex, "pay-1", "payments.create", `{"amount":5}`, nil), http.StatusCreated)
		require.Equal(t, "SUCCEEDED", a["state"])
		require.Equal(t, "SUCCEEDED", b["state"])
		reqs := down.requests()
		require.Len(t, reqs, 2)
		assert.Equal(t, "acme-secret-111", reqs[0].Header.Get("X-Api-Key"))
		assert.Equal(t, "globex-secret-222", reqs[1].Header.Get("X-Api-Key"))
		for _, op := range []map[string]any{a, b} {
			raw, _ := json.Marshal(op)
			assert.NotContains(t, string(raw), "secret-111")
			assert.NotContains(t, string(raw), "secret-222")
			assert.Equal(t, "***", op["result"].(map[string]any)["key_seen"], "the echoed key is masked")
		}

		before := g.Count(t)
		refused := submitAs(t, g, initech, "pay-1", "payments.create", `{"amount":5}`, nil)
		p := requireProblem(t, g, refused, http.StatusUnprocessableEntity, "connection-not-configured")
		assert.Contains(t, p["detail"], `"payments"`)
		assert.Contains(t, p["detail"], `"payments_key"`)
		assert.Equal(t, before, g.Count(t), "nothing recorded")
		assert.Len(t, down.requests(), 2, "nothing sent")
		var n int64
		require.NoError(t, g.Ledger.DB().Model(&models.Operation{}).Where("tenant = ?", "initech").Count(&n).Error)
		assert.Zero(t, n)

		// A known key is answered as usual without the secret: a replay needs no downstream.
		require.NoError(t, g.Ledger.DeleteTenantSecret(ctx, models.AllTenants(), cli, "globex", "payments_key"))
		requireReplay(t, submitAs(t, g, globex, "pay-1", "payments.create", `{"amount":5}`, nil),
			submitAs(t, g, globex, "pay-1", "payments.create", `{"amount":5}`, nil))
		requireProblem(t, g, submitAs(t, g, globex, "pay-2", "payments.create", `{"amount":5}`, nil),
			http.StatusUnprocessableEntity, "connection-not-configured")
		assert.Len(t, down.requests(), 2)

		// The list names secrets, never values; the database holds them sealed.
		list, err := g.Ledger.TenantSecrets(ctx, models.AllTenants(), "")
		require.NoError(t, err)
		require.Len(t, list, 1)
		assert.Equal(t, "acme", list[0].Tenant)
		dump := dumpDatabase(t, g.Ledger.DB())
		assert.NotContains(t, dump, "acme-secret-111")
		assert.NotContains(t, dump, "globex-secret-222")
	})
}

const fileTools = `
connections:
  - name: internal
    base_url: {{DOWN}}
    auth: {bearer: {file: {{FILE}}}}
tools:
  - name: notes.add
    description: Add a note
    effect: write
    params_schema: {type: object, properties: {text: {type: string}}}
    http: {connection: internal, method: POST, url: /notes, idempotency_header: Idempotency-Key}
    retry: {unsent_for: 500ms}   # attempts that send nothing are retried this long
`

// TestFileSecretRotated: a {file: …} secret is read when used, so a rotated mounted secret is
// the one the next call carries, without a restart.
func TestFileSecretRotated(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		down, url := startDownstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			writeJSON(w, http.StatusCreated, map[string]string{"ok": "yes"})
		})
		file := filepath.Join(t.TempDir(), "token")
		require.NoError(t, os.WriteFile(file, []byte("token-before-rotation\n"), 0o600))
		g := startWithTools(t, d, strings.ReplaceAll(fileTools, "{{FILE}}", file), url, gatewaytest.Options{})
		requireOp(t, g.Submit(t, "note-1", "notes.add", `{"text":"a"}`, nil), http.StatusCreated)
		require.NoError(t, os.WriteFile(file, []byte("token-after-rotation\n"), 0o600))
		requireOp(t, g.Submit(t, "note-2", "notes.add", `{"text":"b"}`, nil), http.StatusCreated)
		reqs := down.requests()
		require.Len(t, reqs, 2)
		assert.Equal(t, "Bearer token-before-rotation", reqs[0].Header.Get("Authorization"))
		assert.Equal(t, "Bearer token-after-rotation", reqs[1].Header.Get("Authorization"))

		// Removed: the attempt is not sent (retried for unsent_for, then retries_exhausted).
		require.NoError(t, os.Remove(file))
		op := waitState(t, g, g.Submit(t, "note-3", "notes.add", `{"text":"c"}`, nil).JSON(t)["id"].(string), "FAILED_FINAL", 10*time.Second)
		assert.Equal(t, "retries_exhausted", errorMember(t, op)["class"])
		assert.Len(t, down.requests(), 2, "nothing sent without the secret")
	})
}

// tokenServer is an OAuth2 token endpoint of our own: it issues tok-1, tok-2, … for the
// client credentials grant.
type tokenServer struct {
	mu     sync.Mutex
	issued int
}

func (ts *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		http.Error(w, "bad grant", http.StatusBadRequest)
		return
	}
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != "gateway-client" || secret != "client-secret-xyz" {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	ts.mu.Lock()
	ts.issued++
	tok := fmt.Sprintf("tok-%d-abcdef", ts.issued)
	ts.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
}

func (ts *tokenServer) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.issued
}

const oauthTools = `
connections:
  - name: ledgerapi
    base_url: {{DOWN}}
    auth:
      oauth2: {token_url: {{TOKEN}}, client_id: {env: OAUTH_CLIENT_ID}, client_secret: {env: OAUTH_CLIENT_SECRET},
               scopes: [payments.write]}
  - name: unreachable
    base_url: {{DOWN}}
    auth:
      oauth2: {token_url: "http://127.0.0.1:1/token", client_id: {env: OAUTH_CLIENT_ID}, client_secret: {env: OAUTH_CLIENT_SECRET}}
tools:
  - name: entries.post
    description: Post a ledger entry
    effect: write
    params_schema: {type: object, properties: {n: {type: integer}}}
    http: {connection: ledgerapi, method: POST, url: /entries, idempotency_param: /idempotency_key}
  - name: entries.post_unreachable
    description: Post a ledger entry whose token endpoint is down
    effect: write
    params_schema: {type: object, properties: {n: {type: integer}}}
    http: {connection: unreachable, method: POST, url: /entries, idempotency_param: /idempotency_key}
    retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 20ms, unsent_for: 300ms}
`

// TestOAuth2Connection: one token serves many calls; after a 401 the gateway fetches one new
// token and resends within the attempt (one effect); a second 401 is rejected; an
// unreachable token endpoint is not_sent. Tokens and the client secret appear nowhere.
func TestOAuth2Connection(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		tokens := &tokenServer{}
		tokSrv := httptest.NewServer(tokens)
		t.Cleanup(tokSrv.Close)
		var mu sync.Mutex
		refused := map[string]bool{} // tokens the downstream no longer takes
		refuseAll := false
		effects := 0
		down, url := startDownstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			mu.Lock()
			defer mu.Unlock()
			if refuseAll || refused[tok] || !strings.HasPrefix(tok, "tok-") {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "token " + tok + " is not valid"})
				return
			}
			effects++
			writeJSON(w, http.StatusCreated, map[string]any{"id": fmt.Sprintf("E-%d", effects)})
		})
		env := map[string]string{"OAUTH_CLIENT_ID": "gateway-client", "OAUTH_CLIENT_SECRET": "client-secret-xyz"}
		tools := strings.NewReplacer("{{DOWN}}", url, "{{TOKEN}}", tokSrv.URL).Replace(oauthTools)
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Catalog: func(string) (*catalog.Catalog, error) {
			return catalog.LoadWith([]byte(tools), catalog.Options{Getenv: func(k string) string { return env[k] }})
		}})
		for i := range 3 {
			op := requireOp(t, g.Submit(t, fmt.Sprintf("entry-%d", i), "entries.post", `{"n":1}`, nil), http.StatusCreated)
			require.Equal(t, "SUCCEEDED", op["state"])
		}
		assert.Equal(t, 1, tokens.count(), "one token for many calls")

		// The downstream revokes the token: one refresh, one resend, one effect.
		mu.Lock()
		refused["tok-1-abcdef"] = true
		mu.Unlock()
		op := requireOp(t, g.Submit(t, "entry-revoked", "entries.post", `{"n":2}`, nil), http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"])
		assert.EqualValues(t, 1, op["attempts"], "the resend is within the attempt")
		assert.Equal(t, 2, tokens.count())
		mu.Lock()
		assert.Equal(t, 4, effects)
		mu.Unlock()

		// The downstream refuses every token: one refresh, then rejected.
		mu.Lock()
		refuseAll = true
		mu.Unlock()
		rej := requireOp(t, g.Submit(t, "entry-refused", "entries.post", `{"n":3}`, nil), http.StatusCreated)
		require.Equal(t, "FAILED_FINAL", rej["state"])
		e := errorMember(t, rej)
		assert.Equal(t, "rejected", e["class"])
		assert.Contains(t, e["message"], "refused the gateway's credentials (401)")
		assert.Contains(t, e["message"], "token *** is not valid", "the echoed token is masked")
		assert.Equal(t, 3, tokens.count(), "exactly one refresh after the first 401")

		// The token endpoint unreachable: not sent, retried for unsent_for, then retries_exhausted.
		un := g.Submit(t, "entry-unreachable", "entries.post_unreachable", `{"n":4}`, nil).JSON(t)
		un = waitState(t, g, un["id"].(string), "FAILED_FINAL", 10*time.Second)
		assert.Contains(t, errorMember(t, un)["message"], "the request was not sent")
		assert.Equal(t, "retries_exhausted", errorMember(t, un)["class"])

		var all strings.Builder
		for _, id := range []string{op["id"].(string), rej["id"].(string), un["id"].(string)} {
			all.Write(getOp(t, g, g.Key, id).Body)
			all.Write(g.Do(t, http.MethodGet, "/v1/operations/"+id+"/events", g.Key, nil, "").Body)
		}
		all.WriteString(dumpDatabase(t, g.Ledger.DB()))
		for _, s := range []string{"tok-1-abcdef", "tok-2-abcdef", "tok-3-abcdef", "client-secret-xyz"} {
			assert.NotContains(t, all.String(), s)
		}
		for _, r := range down.requests() {
			var body map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.Body), &body))
			assert.NotEmpty(t, body["idempotency_key"], "the downstream key is written into the body")
		}
	})
}

const keyParamTools = `
tools:
  - name: orders.create
    description: Create an order; the downstream dedupes by the body's idempotency_key
    effect: write
    params_schema: {type: object, required: [item], properties: {item: {type: string}}}
    http: {url: "{{DOWN}}/orders", timeout: 1s, idempotency_param: /idempotency_key, headers: {X-Item: "item {{.Params.item}}"}}
    retry: {max_attempts: 3, initial_backoff: 20ms, max_backoff: 50ms}
`

// TestIdempotencyParamSurvivesLostResponse: the downstream key written into the body (Square's
// idempotency_key) makes an attempt whose answer was lost safe to retry: the retry carries the
// same key, the downstream recognises it, and there is one effect. The agent may not set it.
func TestIdempotencyParamSurvivesLostResponse(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		var mu sync.Mutex
		orders := map[string]string{} // idempotency_key → order id
		lost := 1
		down, url := startDownstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			var in struct {
				Key string `json:"idempotency_key"`
			}
			_ = json.Unmarshal(body, &in)
			mu.Lock()
			id, ok := orders[in.Key]
			if !ok {
				id = fmt.Sprintf("O-%d", len(orders)+1)
				orders[in.Key] = id
			}
			drop := lost > 0
			lost--
			mu.Unlock()
			if drop {
				dropConnection(w) // committed, then the answer is lost
				return
			}
			writeJSON(w, http.StatusCreated, map[string]string{"id": id})
		})
		g := startWithTools(t, d, keyParamTools, url, gatewaytest.Options{})
		first := g.Submit(t, "order-1", "orders.create", `{"item":"lamp"}`, map[string]string{"Prefer": "wait=10"})
		op := requireOp(t, first, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"])
		assert.EqualValues(t, 2, op["attempts"], "the ambiguous attempt was retried")
		assert.Equal(t, map[string]any{"id": "O-1"}, op["result"])
		mu.Lock()
		assert.Len(t, orders, 1, "one effect")
		mu.Unlock()
		reqs := down.requests()
		require.Len(t, reqs, 2)
		for _, r := range reqs {
			assert.JSONEq(t, `{"item":"lamp","idempotency_key":"`+op["downstream_key"].(string)+`"}`, r.Body)
			assert.Equal(t, "item lamp", r.Header.Get("X-Item"), "a templated header")
			assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		}

		bad := g.Submit(t, "order-2", "orders.create", `{"item":"lamp","idempotency_key":"mine"}`, nil)
		p := requireProblem(t, g, bad, http.StatusBadRequest, "invalid-params")
		assert.Contains(t, fmt.Sprint(p["errors"]), "/idempotency_key")
		assert.Len(t, down.requests(), 2)
	})
}

const foundTools = `
tools:
  - name: payments.record
    description: Record a payment; the downstream has no keys but searches by a metadata reference
    effect: write
    params_schema: {type: object, required: [amount], properties: {amount: {type: integer}}}
    http: {url: "{{DOWN}}/v1/payments", timeout: 1s, reference_param: /metadata/reference}
    reconcile:
      url: "{{DOWN}}/v1/payments?reference={{.DownstreamKey}}"
      found: /data/0
      settle: 400ms
    retry: {max_attempts: 3, initial_backoff: 20ms, max_backoff: 50ms}
    review: {escalate_after: 1h}
`

// TestReconcileFound: a search endpoint answers 200 with an empty list when nothing matches.
// With reconcile.found that is "not found": the operation stays UNKNOWN until settle has
// passed, then is retried, and the one effect is recorded as the result (never SUCCEEDED on
// the empty answer).
func TestReconcileFound(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		var mu sync.Mutex
		var payments []map[string]any
		lost := 1
		_, url := startDownstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			mu.Lock()
			defer mu.Unlock()
			if r.Method == http.MethodGet {
				ref := r.URL.Query().Get("reference")
				matches := []map[string]any{}
				for _, p := range payments {
					if p["metadata"].(map[string]any)["reference"] == ref {
						matches = append(matches, p)
					}
				}
				writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": matches})
				return
			}
			if lost > 0 {
				lost-- // the request is lost before it takes effect; the gateway cannot tell
				dropConnection(w)
				return
			}
			var in map[string]any
			_ = json.Unmarshal(body, &in)
			in["id"] = fmt.Sprintf("P-%d", len(payments)+1)
			payments = append(payments, in)
			writeJSON(w, http.StatusCreated, in)
		})
		g := startWithTools(t, d, foundTools, url, gatewaytest.Options{Recovery: true})
		start := time.Now()
		op := requireOp(t, g.Submit(t, "pay-1", "payments.record", `{"amount":7}`, map[string]string{"Prefer": "wait=0"}), http.StatusAccepted)
		id := op["id"].(string)
		waitState(t, g, id, "UNKNOWN", 5*time.Second)
		done := waitState(t, g, id, "SUCCEEDED", 15*time.Second)
		assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond, "not before settle")
		mu.Lock()
		require.Len(t, payments, 1, "one effect")
		dk := done["downstream_key"].(string)
		assert.Equal(t, dk, payments[0]["metadata"].(map[string]any)["reference"], "the key written where the search finds it")
		mu.Unlock()
		result := done["result"].(map[string]any)
		assert.Equal(t, "P-1", result["id"])
		types := eventTypes(events(t, g, g.Key, id))
		assert.Contains(t, types, "reconcile_finished")
		assert.EqualValues(t, 2, done["attempts"], "proven not executed, then retried")
	})
}
