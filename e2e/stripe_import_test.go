package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/toolsimport"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stripeSpec is Stripe's own OpenAPI document, the one stripe-mock serves from (about 8 MB),
// in the module cache: `go mod download` finds it where `go install` of stripe-mock put it.
// Without it the test is skipped on a workstation and fails in CI (CI set).
func stripeSpec(t testing.TB) []byte {
	t.Helper()
	var mod struct{ Dir, Error string }
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/stripe/stripe-mock@v0.203.0").Output()
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	var data []byte
	if err == nil {
		data, err = os.ReadFile(filepath.Join(mod.Dir, "embedded", "openapi", "spec3.json"))
	}
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("Stripe's OpenAPI document not found (%v %s): go install github.com/stripe/stripe-mock@v0.203.0", err, mod.Error)
		}
		t.Fatalf("Stripe's OpenAPI document not found, and CI must run this test: %v %s", err, mod.Error)
	}
	return data
}

// importStripe runs the import as `idemgate tools import --openapi spec3.json --connection
// stripe [--operations …]` does, and returns what it prints.
func importStripe(t testing.TB, doc *toolsimport.OpenAPIDocument, operations ...string) (*toolsimport.File, string) {
	t.Helper()
	start := time.Now()
	f, err := doc.Import(toolsimport.OpenAPIOptions{Operations: operations, Connection: "stripe", Source: "spec3.json"})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, f.WriteYAML(&buf))
	t.Logf("imported %d operation(s) in %s", len(f.Tools), time.Since(start))
	return f, buf.String()
}

// stripeConnection is the block a person adds above the imported tools: stripe-mock's URL and
// a test key.
const stripeConnection = `connections:
  - name: stripe
    base_url: {{STRIPE}}
    auth: {bearer: {env: STRIPE_SECRET_KEY}}
`

// TestImportStripe: Stripe's real document (read once: it is most of the test's time under
// -race) imports as the gateway needs it.
func TestImportStripe(t *testing.T) {
	t.Parallel()
	spec := stripeSpec(t)
	start := time.Now()
	doc, err := toolsimport.ReadOpenAPI(spec)
	require.NoError(t, err)
	t.Logf("read Stripe's %d-byte document in %s", len(spec), time.Since(start))
	t.Run("refund", func(t *testing.T) { testImportStripeRefund(t, doc) })
	t.Run("every shape unedited", func(t *testing.T) { testImportStripeShapes(t, doc) })
	t.Run("whole document", func(t *testing.T) { testImportStripeWholeDocument(t, doc) })
}

// testImportStripeRefund: `tools import --operations PostRefunds --connection stripe` prints a
// tool that, below a connections: block, the catalog loads and the gateway sends: stripe-mock
// (which refuses any param or encoding its document does not allow) answers a refund object,
// and the operation is SUCCEEDED with it as the result.
func testImportStripeRefund(t *testing.T, doc *toolsimport.OpenAPIDocument) {
	stripe := stripeMock(t)
	_, imported := importStripe(t, doc, "PostRefunds")
	assert.Contains(t, imported, "- name: stripe.post_refunds\n")
	assert.Contains(t, imported, "      url: /v1/refunds\n      body: form\n")
	assert.Contains(t, imported, "      # idempotency_header: Idempotency-Key",
		"Stripe's document declares no Idempotency-Key parameter: suggested for review, not switched on")
	tools := strings.ReplaceAll(stripeConnection, "{{STRIPE}}", stripe) + imported
	getenv := func(k string) string { return map[string]string{"STRIPE_SECRET_KEY": "sk_test_123"}[k] }

	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Catalog: func(string) (*catalog.Catalog, error) {
			return catalog.LoadWith([]byte(tools), catalog.Options{Getenv: getenv})
		}})
		tool, ok := g.Catalog.Get("stripe.post_refunds")
		require.True(t, ok)
		assert.Equal(t, catalog.EffectWrite, tool.Effect)
		assert.Equal(t, catalog.BodyForm, tool.HTTP.Body)

		r := g.Submit(t, "imported-refund-1042", "stripe.post_refunds",
			`{"charge":"ch_1Nq","amount":100,"reason":"requested_by_customer","metadata":{"order":"1042"}}`, nil)
		op := requireOp(t, r, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"], "stripe-mock took the request: %s", r.Body)
		result, ok := op["result"].(map[string]any)
		require.True(t, ok, "the result is stripe-mock's answer: %s", r.Body)
		assert.Equal(t, "refund", result["object"])
		assert.Equal(t, "ch_1Nq", result["charge"])
		assert.EqualValues(t, 100, result["amount"])
		assert.Regexp(t, `^re_`, result["id"])

		refused := g.Submit(t, "imported-refund-bad", "stripe.post_refunds", `{"charge":"ch_1Nq","amount":"lots"}`, nil)
		assert.Equal(t, http.StatusBadRequest, refused.Status, "%s", refused.Body)
		assert.Contains(t, string(refused.Body), `"pointer":"/amount"`, "the imported params_schema is enforced before anything is sent")
	})

	// The line a person uncomments once they know Stripe honours the header.
	keyed := strings.Replace(tools, "# idempotency_header:", "idempotency_header:", 1)
	c, err := catalog.LoadWith([]byte(keyed), catalog.Options{Getenv: getenv})
	require.NoError(t, err)
	tool, _ := c.Get("stripe.post_refunds")
	assert.Equal(t, "Idempotency-Key", tool.HTTP.IdempotencyHeader)
}

// testImportStripeWholeDocument: every operation of Stripe's document (about 600) imports in
// one file the catalog loads: each params_schema compiles as JSON Schema 2020-12 with only the
// keywords the catalog allows, each name and URL template is one it takes; and the YAML says
// exactly the schema import made (Stripe's descriptions hold every kind of text to quote).
func testImportStripeWholeDocument(t *testing.T, doc *toolsimport.OpenAPIDocument) {
	f, imported := importStripe(t, doc)
	tools := strings.ReplaceAll(stripeConnection, "{{STRIPE}}", "http://127.0.0.1:12111") + imported
	c, err := catalog.LoadWith([]byte(tools), catalog.Options{Getenv: func(string) string { return "sk_test_123" }})
	require.NoError(t, err)
	assert.Greater(t, len(c.Tools()), 500)
	for _, name := range []string{"stripe.get_refunds_refund", "stripe.post_customers", "stripe.delete_customers_customer"} {
		_, ok := c.Get(name)
		assert.True(t, ok, name)
	}
	require.Len(t, c.Tools(), len(f.Tools))
	for i, tool := range c.Tools() {
		want, err := json.Marshal(f.Tools[i].ParamsSchema)
		require.NoError(t, err)
		got, err := json.Marshal(tool.ParamsSchemaRaw)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(got), tool.Name)
	}
}

// droppingProxy passes requests to target and, for the first request matching drop, loses the
// answer after the target has taken it: the connection closes before a byte comes back.
type droppingProxy struct {
	target *url.URL
	drop   func(*http.Request) bool
	mu     sync.Mutex
	keys   []string // the Idempotency-Key of every request matching drop
	seen   []string // every request: method, path, query and form body
	done   bool
}

func (p *droppingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.mu.Lock()
	p.seen = append(p.seen, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+string(body))
	p.mu.Unlock()
	rp := httputil.NewSingleHostReverseProxy(p.target)
	if !p.drop(r) {
		rp.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.keys = append(p.keys, r.Header.Get("Idempotency-Key"))
	first := !p.done
	p.done = true
	p.mu.Unlock()
	if !first {
		rp.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	rp.ServeHTTP(rec, r) // stripe-mock took it
	dropConnection(w)
}

// testImportStripeShapes: what `tools import --openapi spec3.json --connection stripe
// --idempotency-header Idempotency-Key` writes works unedited against stripe-mock, which
// validates every request against Stripe's document: a create (form, nested metadata, an
// array), an update (the path param only in the URL), a list with limit and starting_after, a
// search, a retrieve and a delete all SUCCEED; and a create whose answer is lost is retried
// with the same Idempotency-Key. Both engines.
func testImportStripeShapes(t *testing.T, doc *toolsimport.OpenAPIDocument) {
	stripe := stripeMock(t)
	target, err := url.Parse(stripe)
	require.NoError(t, err)
	f, err := doc.Import(toolsimport.OpenAPIOptions{Connection: "stripe", Source: "spec3.json", IdempotencyHeader: "Idempotency-Key"})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, f.WriteYAML(&buf))
	getenv := func(k string) string { return map[string]string{"STRIPE_SECRET_KEY": "sk_test_123"}[k] }

	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		proxy := &droppingProxy{target: target, drop: func(r *http.Request) bool {
			return r.Method == http.MethodPost && r.URL.Path == "/v1/customers"
		}}
		srv := httptest.NewServer(proxy)
		t.Cleanup(srv.Close)
		tools := strings.ReplaceAll(stripeConnection, "{{STRIPE}}", srv.URL) + buf.String()
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Catalog: func(string) (*catalog.Catalog, error) {
			return catalog.LoadWith([]byte(tools), catalog.Options{Getenv: getenv})
		}})
		calls := []struct{ tool, params string }{
			{"stripe.post_customers", `{"name":"Bob","metadata":{"order":"1042"},"preferred_locales":["en","fr"]}`},
			{"stripe.post_customers_customer", `{"customer":"cus_123","name":"Robert"}`},
			{"stripe.get_customers", `{"limit":3,"starting_after":"cus_123"}`},
			{"stripe.get_customers_search", `{"query":"name:'Bob'"}`},
			{"stripe.get_customers_customer", `{"customer":"cus_123"}`},
			{"stripe.delete_customers_customer", `{"customer":"cus_123"}`},
		}
		for i, c := range calls {
			r := g.Submit(t, fmt.Sprintf("shape-%d", i), c.tool, c.params, map[string]string{"Prefer": "wait=30"})
			require.Contains(t, []int{http.StatusCreated, http.StatusOK}, r.Status, "%s: %s", c.tool, r.Body)
			op := r.JSON(t)
			require.Equal(t, "SUCCEEDED", op["state"], "%s: stripe-mock took the request as imported: %s", c.tool, r.Body)
		}
		created := getOp(t, g, g.Key, requireOp(t, g.Submit(t, "shape-0", "stripe.post_customers",
			`{"name":"Bob","metadata":{"order":"1042"},"preferred_locales":["en","fr"]}`, nil), http.StatusOK)["id"].(string)).JSON(t)
		assert.EqualValues(t, 2, created["attempts"], "the lost answer was retried")
		proxy.mu.Lock()
		defer proxy.mu.Unlock()
		require.Len(t, proxy.keys, 2, "sent twice")
		assert.NotEmpty(t, proxy.keys[0])
		assert.Equal(t, proxy.keys[0], proxy.keys[1], "with the same Idempotency-Key: Stripe makes one customer")
		assert.Contains(t, proxy.seen, "GET /v1/customers?limit=3&starting_after=cus_123 ", "a list's optional params in its query")
		assert.Contains(t, proxy.seen, "POST /v1/customers/cus_123? name=Robert", "an update's path param in its URL only")
	})
}
