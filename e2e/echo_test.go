package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"gorm.io/gorm"
)

// echoTools are tools whose downstream (echoDownstream) quotes back what it is sent. {{ECHO}}
// is its URL.
const echoTools = `
tools:
  - name: cards.charge
    description: Charge a card; the downstream quotes the request in its 201
    effect: write
    params_schema:
      type: object
      required: [card_number, amount_cents]
      properties:
        card_number: {type: string}
        password: {type: string}
        amount_cents: {type: integer}
    sensitive_params: [card_number, password]
    http: {url: "{{ECHO}}/charge", timeout: 2s, result_reference: /id}
  - name: cards.check
    description: Check a card; the downstream declines it, quoting it in its 422
    effect: write
    params_schema:
      type: object
      required: [card_number]
      properties:
        card_number: {type: string}
        password: {type: string}
    sensitive_params: [card_number, password]
    http: {url: "{{ECHO}}/reject", timeout: 2s}
`

// echoPassword needs escaping in JSON ("\"") and HTML-safe JSON ("\u003c"), as Go's
// encoding/json writes it.
const echoPassword = `pa"ss<wörd>`

// echoDownstream is a careless downstream: it commits a charge and answers 201 quoting the
// request back (as JSON, inside a message, and as a JSON string of the raw body), or declines
// with a 422 that quotes the card. It keeps what it received, to show the card did arrive.
type echoDownstream struct {
	mu       sync.Mutex
	charges  int
	received []string
}

func (e *echoDownstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var in struct {
		Card     string `json:"card_number"`
		Password string `json:"password"`
	}
	_ = json.Unmarshal(body, &in)
	e.mu.Lock()
	e.received = append(e.received, string(body))
	n := e.charges + 1
	if r.URL.Path == "/charge" {
		e.charges = n
	}
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/charge" {
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("C-%d", n), "received": json.RawMessage(body),
			"message": "charged card " + in.Card + " with password " + in.Password, "request": string(body)})
		return
	}
	w.WriteHeader(http.StatusUnprocessableEntity)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": "card " + in.Card + " declined", "password": in.Password})
}

// TestEchoedSecretsMasked: a downstream that echoes a card number and a password, in a 201
// body and in a 422 error, does not make either appear anywhere: not in API answers, events,
// attempts, webhook payloads, either export format, the console page, the logs, the traces,
// nor anywhere in the database (whose params are sealed with a data key here). The downstream
// still received both in clear.
func TestEchoedSecretsMasked(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		down := &echoDownstream{}
		downSrv := httptest.NewServer(down)
		t.Cleanup(downSrv.Close)
		keys, err := datakey.Parse(datakey.Generate(), "")
		require.NoError(t, err)
		var logs lockedBuffer
		spans := tracetest.NewSpanRecorder()
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{LogTo: &logs, DataKeys: keys,
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
			Catalog: func(string) (*catalog.Catalog, error) {
				return catalog.Load([]byte(strings.ReplaceAll(echoTools, "{{ECHO}}", downSrv.URL)))
			}})
		ctx := context.Background()
		_, err = g.Ledger.CreateWebhook(ctx, models.AllTenants(), models.Requester{Actor: "cli"}, models.NewWebhook{Tenant: g.Tenant,
			URL: "http://127.0.0.1:9/hook", Events: models.WebhookEventTypes, AllowPrivate: true})
		require.NoError(t, err)

		secrets := []string{card, "42424242", echoPassword, "wörd", `ss\u003cw`}
		noLeak := func(t *testing.T, what, text string) {
			t.Helper()
			for _, s := range secrets {
				assert.NotContains(t, text, s, "%s shows a secret", what)
			}
		}
		params := func(tool string) string {
			b, _ := json.Marshal(map[string]any{"card_number": card, "password": echoPassword, "amount_cents": 1999})
			if tool == "cards.check" {
				b, _ = json.Marshal(map[string]any{"card_number": card, "password": echoPassword})
			}
			return string(b)
		}

		// A 201 that quotes the request.
		charged := g.Submit(t, "charge-1", "cards.charge", params("cards.charge"), nil)
		noLeak(t, "POST (201)", string(charged.Body))
		op := requireOp(t, charged, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"])
		result := op["result"].(map[string]any)
		assert.Equal(t, "charged card *** with password ***", result["message"], "the echo is masked in place")
		assert.Equal(t, "***", result["received"].(map[string]any)["card_number"])
		assert.Contains(t, result["request"], `"card_number":"***"`)
		assert.Equal(t, "C-1", op["downstream_ref"], "the rest of the answer is as the downstream sent it")

		// A 422 that quotes the card.
		declined := g.Submit(t, "check-1", "cards.check", params("cards.check"), nil)
		noLeak(t, "POST (422 downstream)", string(declined.Body))
		dop := requireOp(t, declined, http.StatusCreated)
		require.Equal(t, "FAILED_FINAL", dop["state"])
		msg := dop["error"].(map[string]any)["message"].(string)
		assert.Contains(t, msg, `card *** declined`)
		assert.Contains(t, msg, `"password":"***"`)

		down.mu.Lock()
		assert.Contains(t, strings.Join(down.received, "\n"), card, "the downstream received the card in clear")
		assert.Equal(t, 1, down.charges)
		down.mu.Unlock()

		for _, id := range []string{op["id"].(string), dop["id"].(string)} {
			noLeak(t, "GET "+id, string(getOp(t, g, g.Key, id).Body))
			noLeak(t, "events of "+id, string(g.Do(t, http.MethodGet, "/v1/operations/"+id+"/events", g.Key, nil, "").Body))
		}
		noLeak(t, "replay", string(g.Submit(t, "charge-1", "cards.charge", params("cards.charge"), nil).Body))
		noLeak(t, "list", string(g.Do(t, http.MethodGet, "/v1/operations", g.Key, nil, "").Body))

		for _, f := range []export.Format{export.CSV, export.NDJSON} {
			var buf bytes.Buffer
			x := export.Exporter{Ledger: g.Ledger, Catalog: g.Catalog}
			_, err := x.Write(ctx, &buf, export.Request{Format: f, Scope: models.AllTenants(), Filter: export.Filter{Tenant: g.Tenant}, Actor: "cli"})
			require.NoError(t, err)
			require.Contains(t, buf.String(), "***", "the %s export has the masked values", f)
			noLeak(t, string(f)+" export", buf.String())
		}

		var payloads []string
		require.NoError(t, g.Ledger.DB().Raw("SELECT payload FROM outbox").Scan(&payloads).Error)
		require.NotEmpty(t, payloads, "the changes were announced")
		noLeak(t, "webhook payloads", strings.Join(payloads, "\n"))
		assert.Contains(t, strings.Join(payloads, "\n"), "charged card ***")

		noLeak(t, "the database", dumpDatabase(t, g.Ledger.DB()))

		browser := consoleLogin(t, g)
		for _, id := range []string{op["id"].(string), dop["id"].(string)} {
			page := browser.get(t, "/operations/"+id)
			require.Equal(t, http.StatusOK, page.status)
			require.Contains(t, page.body, "***", "the console shows where the values were")
			noLeak(t, "console page of "+id, page.body)
		}

		noLeak(t, "the logs", logs.String())
		var traced strings.Builder
		for _, s := range spans.Ended() {
			fmt.Fprintf(&traced, "%s %v %v %v\n", s.Name(), s.Attributes(), s.Events(), s.Status())
		}
		noLeak(t, "the traces", traced.String())
	})
}

// dumpDatabase returns every row of every table of the ledger as text: what anyone who can
// read the database sees.
func dumpDatabase(t *testing.T, db *gorm.DB) string {
	t.Helper()
	tables, err := db.Migrator().GetTables()
	require.NoError(t, err)
	require.Contains(t, tables, "operations")
	var out strings.Builder
	for _, table := range tables {
		rows, err := db.Raw("SELECT * FROM " + table).Rows()
		require.NoError(t, err)
		cols, err := rows.Columns()
		require.NoError(t, err)
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				fmt.Fprintf(&out, "%s.%s=%v ", table, cols[i], v)
			}
			out.WriteByte('\n')
		}
		require.NoError(t, rows.Err())
		rows.Close()
	}
	return out.String()
}

// consoleBrowser is a signed-in console session.
type consoleBrowser struct {
	base   string
	client *http.Client
}

type consolePage struct {
	status int
	body   string
}

func (b *consoleBrowser) get(t *testing.T, path string) consolePage {
	t.Helper()
	resp, err := b.client.Get(b.base + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return consolePage{status: resp.StatusCode, body: string(body)}
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// consoleLogin creates an auditor of every tenant and signs in through the login form.
func consoleLogin(t *testing.T, g *gatewaytest.Gateway) *consoleBrowser {
	t.Helper()
	const email, password = "auditor@example.com", "correct horse battery staple"
	_, err := g.Ledger.CreateUser(context.Background(), models.AllTenants(), models.Requester{Actor: models.ActorCLI}, models.NewUser{Email: email, Password: password, Role: models.RoleAuditor})
	require.NoError(t, err)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	b := &consoleBrowser{base: g.URL, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	login := b.get(t, "/login")
	m := csrfField.FindStringSubmatch(login.body)
	require.Len(t, m, 2, "the login form has a CSRF token")
	resp, err := b.client.PostForm(g.URL+"/login", url.Values{"email": {email}, "password": {password}, "csrf_token": {m[1]}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed in")
	return b
}
