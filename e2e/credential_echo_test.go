package e2e_test

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const quotingTokenTools = `
connections:
  - name: basic
    base_url: {{DOWN}}
    auth:
      oauth2: {token_url: {{TOKEN}}, client_id: {env: CID}, client_secret: {env: CSECRET}, auth_style: basic}
  - name: post
    base_url: {{DOWN}}
    auth:
      oauth2: {token_url: {{TOKEN}}, client_id: {env: CID}, client_secret: {env: CSECRET}, auth_style: post}
tools:
  - name: entries.basic
    description: Post an entry; the client authenticates with Basic
    effect: write
    params_schema: {type: object}
    http: {connection: basic, method: POST, url: /entries}
    retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 20ms, unsent_for: 300ms}
  - name: entries.post
    description: Post an entry; the client sends its secret in the form
    effect: write
    params_schema: {type: object}
    http: {connection: post, method: POST, url: /entries}
    retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 20ms, unsent_for: 300ms}
`

// TestOAuth2TokenEndpointQuotingTheRequest: a token endpoint whose error quotes the request it
// refused (its Authorization header, its form body) quotes the client's secret, reversibly in
// Basic's base64. Nothing the gateway records or answers may hold it, in any spelling.
func TestOAuth2TokenEndpointQuotingTheRequest(t *testing.T) {
	t.Parallel()
	const id, secret = "gateway client", "s3cret/with+signs=="
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		tokSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = r.ParseForm()
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request",
				"error_description": "refused Authorization: " + r.Header.Get("Authorization") + " with body " + r.PostForm.Encode()})
		}))
		t.Cleanup(tokSrv.Close)
		down, url := startDownstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusCreated) })
		tools := strings.NewReplacer("{{DOWN}}", url, "{{TOKEN}}", tokSrv.URL).Replace(quotingTokenTools)
		env := map[string]string{"CID": id, "CSECRET": secret}
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Catalog: func(string) (*catalog.Catalog, error) {
			return catalog.LoadWith([]byte(tools), catalog.Options{Getenv: func(k string) string { return env[k] }})
		}})
		var all strings.Builder
		for _, tool := range []string{"entries.basic", "entries.post"} {
			op := g.Submit(t, "k-"+tool, tool, `{}`, nil).JSON(t)
			op = waitState(t, g, op["id"].(string), "FAILED_FINAL", 10*time.Second)
			msg, _ := errorMember(t, op)["message"].(string)
			assert.Contains(t, msg, "invalid_request", "the endpoint's answer is still told")
			assert.Contains(t, msg, "***", "with the credential masked")
			all.Write(getOp(t, g, g.Key, op["id"].(string)).Body)
			all.Write(g.Do(t, http.MethodGet, "/v1/operations/"+op["id"].(string)+"/events", g.Key, nil, "").Body)
		}
		all.WriteString(dumpDatabase(t, g.Ledger.DB()))
		require.Empty(t, down.requests(), "no token, no call")
		b64 := base64.StdEncoding.EncodeToString
		for _, leak := range []string{secret, neturl.QueryEscape(secret), b64([]byte(id + ":" + secret)),
			b64([]byte(neturl.QueryEscape(id) + ":" + neturl.QueryEscape(secret)))} {
			assert.NotContains(t, all.String(), leak)
		}
	})
}
