package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func loadEnv(src string, env map[string]string) (*Catalog, error) {
	return LoadWith([]byte(src), Options{Getenv: func(k string) string { return env[k] }})
}

const connTool = `
  - name: stripe.refund
    description: Refund
    effect: write
    params_schema: {type: object, properties: {charge: {type: string}, card: {type: string}}}
    sensitive_params: [card]
    http: {connection: stripe, url: /v1/refunds, body: form, idempotency_header: Idempotency-Key}
`

func TestLoadConnections(t *testing.T) {
	t.Parallel()
	c, err := loadEnv(`
connections:
  - name: stripe
    base_url: https://api.stripe.com/
    auth: {bearer: {env: STRIPE_KEY}}
    headers: {Stripe-Version: "2024-06-20", X-Tenant-Key: {tenant: extra}}
  - name: search
    base_url: https://search.example
tools:`+connTool+`
  - name: payments.create
    description: Create
    effect: write
    params_schema: {type: object}
    http: {connection: stripe, url: /v1/payments, reference_param: /metadata/reference, headers: {X-Order: "{{.Params.charge}}"}}
    reconcile: {connection: search, url: "/v1/payments?ref={{.DownstreamKey}}", found: /data/0}
`, map[string]string{"STRIPE_KEY": "sk_test_abc"})
	require.NoError(t, err)
	tl, ok := c.Get("stripe.refund")
	require.True(t, ok)
	assert.Equal(t, "https://api.stripe.com/v1/refunds", tl.HTTP.URL, "a path is joined to base_url")
	assert.Equal(t, BodyForm, tl.HTTP.Encoding())
	require.NotNil(t, tl.HTTP.Connection.Auth)
	assert.Equal(t, AuthBearer, tl.HTTP.Connection.Auth.Kind)
	assert.Equal(t, "{env: STRIPE_KEY}", tl.HTTP.Connection.Auth.Bearer.String(), "a secret prints as its reference")
	assert.NotContains(t, tl.HTTP.Connection.Auth.Bearer.String(), "sk_test_abc")
	p, _ := c.Get("payments.create")
	assert.Equal(t, "https://search.example/v1/payments?ref={{.DownstreamKey}}", p.Reconcile.URL)
	assert.Equal(t, "search", p.Reconcile.Connection.Name, "reconcile names its own connection")
	assert.Equal(t, "/data/0", p.Reconcile.Found)
	assert.Equal(t, []ConnectionSecret{{Connection: "stripe", Secret: "extra"}}, p.TenantSecrets())
	assert.False(t, p.RetrySafe(), "a reference param implies no dedupe")
	assert.Equal(t, "/metadata/reference", p.KeyParams()[0])
	assert.Error(t, c.NeedsDataKey(), "a tenant secret needs a data key")
	assert.Contains(t, c.NeedsDataKey().Error(), `connection "stripe"`)
	assert.Len(t, c.Connections(), 2)

	errs := p.ValidateParams(map[string]any{"metadata": map[string]any{"reference": "mine"}})
	require.Len(t, errs, 1)
	assert.Equal(t, "/metadata/reference", errs[0].Pointer)
}

func TestLoadConnectionsRefused(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(file, []byte("x\n"), 0o600))
	base := "connections:\n  - name: stripe\n    base_url: https://api.stripe.com\n    auth: {bearer: {env: STRIPE_KEY}}\ntools:"
	cases := []struct {
		name, src, want string
	}{
		{"unknown connection", "tools:" + strings.Replace(connTool, "connection: stripe", "connection: stripey", 1),
			`tool "stripe.refund": http.connection: unknown connection "stripey"`},
		{"env secret unset", strings.Replace(base, "STRIPE_KEY", "MISSING_KEY", 1) + connTool,
			`connection "stripe": auth.bearer: {env: MISSING_KEY}: the environment variable is not set`},
		{"file secret missing", strings.Replace(base, "{env: STRIPE_KEY}", "{file: /nonexistent/secret}", 1) + connTool,
			`connection "stripe": auth.bearer: {file: /nonexistent/secret}`},
		{"relative URL without base_url", strings.Replace(base, "    base_url: https://api.stripe.com\n", "", 1) + connTool,
			`tool "stripe.refund": http.url: "/v1/refunds" is a path, but connection "stripe" has no base_url`},
		{"absolute URL outside base_url", base + strings.Replace(connTool, "url: /v1/refunds", "url: https://evil.example/v1/refunds", 1),
			`tool "stripe.refund": http.url: invalid URL "https://evil.example/v1/refunds": outside connection "stripe"'s base_url`},
		{"both key places", base + strings.Replace(connTool, "idempotency_header: Idempotency-Key", "idempotency_header: Idempotency-Key, idempotency_param: /key", 1),
			`tool "stripe.refund": http.idempotency_param: give idempotency_header or idempotency_param, not both`},
		{"two auth kinds", strings.Replace(base, "auth: {bearer: {env: STRIPE_KEY}}", "auth: {bearer: {env: STRIPE_KEY}, header: {name: X-Key, value: {env: STRIPE_KEY}}}", 1) + connTool,
			`connection "stripe": auth: give only one of bearer, basic, header or oauth2`},
		{"literal credential", strings.Replace(base, "{env: STRIPE_KEY}", "sk_live_written_here", 1) + connTool,
			`connection "stripe": auth.bearer: a credential must be a secret reference`},
		{"sensitive param in a header", base + strings.Replace(connTool, "body: form,", `body: form, headers: {X-Card: "{{.Params.card}}"},`, 1),
			`tool "stripe.refund": http.headers.X-Card: {{.Params.card}} would put the sensitive param /card into a header`},
		{"form body on GET", base + strings.Replace(connTool, "body: form,", "method: GET, body: form,", 1),
			`tool "stripe.refund": http.body: a GET sends no body`},
		{"bad found pointer", base + connTool + "    reconcile: {url: /v1/refunds, found: data}\n",
			`tool "stripe.refund": reconcile.found: invalid JSON pointer "data"`},
		{"credentials in base_url", strings.Replace(base, "https://api.stripe.com", "https://u:p@api.stripe.com", 1) + connTool,
			`connection "stripe": base_url: invalid URL "https://u:p@api.stripe.com": credentials in the URL are not allowed`},
		{"missing TLS file", strings.Replace(base, "    auth:", "    tls: {ca_file: missing-ca.pem}\n    auth:", 1) + connTool,
			`connection "stripe": tls.ca_file:`},
		{"oauth2 bad auth_style", strings.Replace(base, "auth: {bearer: {env: STRIPE_KEY}}",
			"auth: {oauth2: {token_url: https://id.example/token, client_id: cid, client_secret: {file: "+file+"}, auth_style: header}}", 1) + connTool,
			`connection "stripe": auth.oauth2.auth_style: invalid "header"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadEnv(tc.src, map[string]string{"STRIPE_KEY": "sk_test_abc"})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "tools file: "+tc.want)
			assert.NotContains(t, err.Error(), "sk_test_abc", "an error never shows a secret's value")
		})
	}
}

func TestSecretResolveReadsFileWhenUsed(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "s")
	require.NoError(t, os.WriteFile(file, []byte("one\nignored\n"), 0o600))
	s := Secret{File: file}
	v, err := s.Resolve(nil)
	require.NoError(t, err)
	assert.Equal(t, "one", v)
	require.NoError(t, os.WriteFile(file, []byte("two"), 0o600))
	v, err = s.Resolve(nil)
	require.NoError(t, err)
	assert.Equal(t, "two", v)
	require.NoError(t, os.Remove(file))
	_, err = s.Resolve(nil)
	assert.ErrorIs(t, err, ErrSecretMissing)
}
