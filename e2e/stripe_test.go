package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// stripeMock starts Stripe's own mock server (github.com/stripe/stripe-mock, installed by
// .ci/run) on loopback for the test and returns its HTTP URL. It validates every request
// against Stripe's OpenAPI document: a wrong encoding or an unknown param is a 400, a missing
// or bad-looking key a 401 that quotes the Authorization header it got. Without the binary
// the test is skipped on a workstation and fails in CI (CI set).
func stripeMock(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("stripe-mock")
	if err != nil {
		if out, gerr := exec.Command("go", "env", "GOPATH").Output(); gerr == nil {
			candidate := filepath.Join(strings.TrimSpace(string(out)), "bin", "stripe-mock")
			if _, serr := os.Stat(candidate); serr == nil {
				bin, err = candidate, nil
			}
		}
	}
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("stripe-mock not found: go install github.com/stripe/stripe-mock@v0.203.0")
		}
		t.Fatalf("stripe-mock not found, and CI must run this test: %v", err)
	}
	// -http-addr on loopback: -http-port would listen on every interface.
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`Listening for HTTP at address: (\S+)`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("stripe-mock did not say where it listens")
	}
	return ""
}

// stripeTools are the README's Stripe refund tool, and the same with a key Stripe would not
// take. {{STRIPE}} is stripe-mock's URL.
const stripeTools = `
connections:
  - name: stripe
    base_url: {{STRIPE}}
    auth: {bearer: {env: STRIPE_SECRET_KEY}}
    headers: {Stripe-Version: "2024-06-20"}
  - name: stripe-bad
    base_url: {{STRIPE}}
    auth: {bearer: {env: STRIPE_BAD_KEY}}
tools:
  - name: stripe.refund
    description: Refund a charge
    effect: write
    params_schema:
      type: object
      required: [charge]
      properties: {charge: {type: string}, amount: {type: integer}, metadata: {type: object}}
    http:
      connection: stripe
      method: POST
      url: /v1/refunds
      body: form
      headers: {X-Order: "{{.Params.charge}}"}
      idempotency_header: Idempotency-Key
      result_reference: /id
  - name: stripe.refund_badkey
    description: Refund a charge with a key Stripe refuses
    effect: write
    params_schema:
      type: object
      required: [charge]
      properties: {charge: {type: string}}
    http: {connection: stripe-bad, method: POST, url: /v1/refunds, body: form, idempotency_header: Idempotency-Key}
`

const (
	stripeKey    = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"
	stripeBadKey = "not_a_stripe_key_5f3a9c"
)

// TestStripeRefundThroughConnection: a refund reaches stripe-mock through a connection with a
// bearer key from the environment and a form body with nested metadata (stripe-mock refuses
// any other encoding or an unknown param, so SUCCEEDED proves the shape); a replay answers
// the same; the key is in no API answer, event, export, webhook payload, database row, log
// line, span, metric or console page. A key
// Stripe refuses ends FAILED_FINAL, and its echo in the recorded error is "***".
func TestStripeRefundThroughConnection(t *testing.T) {
	t.Parallel()
	stripe := stripeMock(t)
	env := map[string]string{"STRIPE_SECRET_KEY": stripeKey, "STRIPE_BAD_KEY": stripeBadKey}
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		var logs lockedBuffer
		spans := tracetest.NewSpanRecorder()
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{LogTo: &logs,
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
			Catalog: func(string) (*catalog.Catalog, error) {
				return catalog.LoadWith([]byte(strings.ReplaceAll(stripeTools, "{{STRIPE}}", stripe)),
					catalog.Options{Getenv: func(k string) string { return env[k] }})
			}})
		_, err := g.Ledger.CreateWebhook(context.Background(), models.AllTenants(), models.Requester{Actor: "cli"}, models.NewWebhook{Tenant: g.Tenant,
			URL: "http://127.0.0.1:9/hook", Events: models.WebhookEventTypes, AllowPrivate: true})
		require.NoError(t, err)
		noLeak := func(t *testing.T, what, text string) {
			t.Helper()
			for _, s := range []string{stripeKey, stripeBadKey, "4eC39HqLyjWDarjtT1zdp7dc"} {
				assert.NotContains(t, text, s, "%s shows the key", what)
			}
		}
		params := `{"charge":"ch_1Nq","amount":100,"metadata":{"order":"1042","source":"agent"}}`
		first := g.Submit(t, "refund-1042", "stripe.refund", params, nil)
		noLeak(t, "POST", string(first.Body))
		op := requireOp(t, first, http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"], "stripe-mock took the request: %s", first.Body)
		result := op["result"].(map[string]any)
		assert.Equal(t, "refund", result["object"])
		assert.Equal(t, "ch_1Nq", result["charge"])
		assert.EqualValues(t, 100, result["amount"])
		assert.Regexp(t, `^re_`, op["downstream_ref"])
		id := op["id"].(string)

		replay := g.Submit(t, "refund-1042", "stripe.refund", params, nil)
		noLeak(t, "replay", string(replay.Body))
		requireReplay(t, replay, first)
		assert.EqualValues(t, 1, op["attempts"])

		noLeak(t, "GET", string(getOp(t, g, g.Key, id).Body))
		noLeak(t, "list", string(g.Do(t, http.MethodGet, "/v1/operations", g.Key, nil, "").Body))
		noLeak(t, "events", string(g.Do(t, http.MethodGet, "/v1/operations/"+id+"/events", g.Key, nil, "").Body))

		// A key Stripe refuses: rejected, and its echo masked in what is recorded.
		bad := g.Submit(t, "refund-bad", "stripe.refund_badkey", `{"charge":"ch_1Nq"}`, nil)
		noLeak(t, "POST (bad key)", string(bad.Body))
		bop := requireOp(t, bad, http.StatusCreated)
		require.Equal(t, "FAILED_FINAL", bop["state"])
		berr := errorMember(t, bop)
		assert.Equal(t, "rejected", berr["class"])
		assert.EqualValues(t, 401, berr["downstream_status"])
		msg := berr["message"].(string)
		assert.Contains(t, msg, "refused the gateway's credentials")
		assert.Contains(t, msg, "Authorization was 'Bearer ***'", "stripe-mock's quote of the key is masked")
		noLeak(t, "GET (bad key)", string(getOp(t, g, g.Key, bop["id"].(string)).Body))
		noLeak(t, "events (bad key)", string(g.Do(t, http.MethodGet, "/v1/operations/"+bop["id"].(string)+"/events", g.Key, nil, "").Body))

		ctx := context.Background()
		for _, f := range []export.Format{export.CSV, export.NDJSON} {
			var buf bytes.Buffer
			x := export.Exporter{Ledger: g.Ledger, Catalog: g.Catalog}
			_, err := x.Write(ctx, &buf, export.Request{Format: f, Scope: models.AllTenants(), Filter: export.Filter{Tenant: g.Tenant}, Actor: "cli"})
			require.NoError(t, err)
			require.Contains(t, buf.String(), id, "the %s export has the refund", f)
			noLeak(t, string(f)+" export", buf.String())
		}
		noLeak(t, "the database", dumpDatabase(t, g.Ledger.DB()))

		browser := consoleLogin(t, g)
		for _, oid := range []string{id, bop["id"].(string)} {
			page := browser.get(t, "/operations/"+oid)
			require.Equal(t, http.StatusOK, page.status)
			noLeak(t, "console page of "+oid, page.body)
		}
		require.Contains(t, logs.String(), id, "the log speaks of the refund")
		noLeak(t, "the logs", logs.String())
		var payloads []string
		require.NoError(t, g.Ledger.DB().Raw("SELECT payload FROM outbox").Scan(&payloads).Error)
		require.NotEmpty(t, payloads, "the changes were announced")
		noLeak(t, "webhook payloads", strings.Join(payloads, "\n"))
		var traced strings.Builder
		for _, s := range spans.Ended() {
			fmt.Fprintf(&traced, "%s %v %v %v\n", s.Name(), s.Attributes(), s.Events(), s.Status())
		}
		require.NotEmpty(t, spans.Ended())
		noLeak(t, "the traces", traced.String())
		noLeak(t, "the metrics", g.Scrape(t))
	})
}
