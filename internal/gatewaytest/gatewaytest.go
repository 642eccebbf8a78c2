// Package gatewaytest starts a whole gateway for end-to-end tests: a real database of its own
// (PostgreSQL or SQLite), the real executor and dispatcher, the real HTTP stack on a loopback
// port, and the sandbox downstream on another, which counts the side effects it commits.
package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/mcpclient"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/idemgate/idemgate/web"
	"github.com/idemgate/idemgate/web/telemetry"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// Tools is the test catalogue; {{SANDBOX}} becomes the sandbox's URL. Timings are short so
// retries happen within a test's patience.
const Tools = `
tools:
  - name: tickets.create
    description: Create a support ticket
    effect: write
    params_schema:
      type: object
      required: [subject]
      additionalProperties: false
      properties:
        subject: {type: string, maxLength: 200}
        body: {type: string}
        priority: {type: string}
    summary: "{{.Params.subject}}"
    http:
      url: "{{SANDBOX}}/tickets"
      timeout: 1s
      idempotency_header: Idempotency-Key
      result_reference: /id
    reconcile:
      url: "{{SANDBOX}}/tickets?reference={{.OperationID}}"
      settle: 200ms
    retry: {max_attempts: 4, initial_backoff: 20ms, max_backoff: 200ms}
    compensation:
      tool: tickets.close
      params: {ticket_id: "{{.Result.id}}", reason: "compensation for {{.OperationID}}"}
  - name: tickets.close
    description: Close a ticket
    effect: idempotent
    params_schema:
      type: object
      required: [ticket_id]
      properties:
        ticket_id: {type: string}
        reason: {type: string}
    http:
      url: "{{SANDBOX}}/tickets/{{.Params.ticket_id}}/close"
      timeout: 1s
  - name: refunds.issue
    description: Refund an order
    effect: write
    params_schema:
      type: object
      required: [order_id, amount_cents, currency]
      additionalProperties: false
      properties:
        order_id: {type: string}
        amount_cents: {type: integer, minimum: 1}
        currency: {type: string, pattern: "^[A-Z]{3}$"}
        card_number: {type: string}
    sensitive_params: [card_number]
    summary: "{{money .Params.amount_cents .Params.currency}} to order {{.Params.order_id}}"
    reference_url: "{{SANDBOX}}/refunds?reference={{.DownstreamKey}}"
    http:
      url: "{{SANDBOX}}/refunds"
      timeout: 1s
      result_reference: /id
    reconcile:
      url: "{{SANDBOX}}/refunds?reference={{.OperationID}}"
      settle: 200ms
    retry: {max_attempts: 3, initial_backoff: 20ms, max_backoff: 2s}
  - name: email.send
    description: Send an email
    effect: write
    params_schema:
      type: object
      required: [to, subject, body]
      properties:
        to: {type: string}
        subject: {type: string}
        body: {type: string}
    summary: "To {{.Params.to}}: {{.Params.subject}}"
    http:
      url: "{{SANDBOX}}/emails"
      timeout: 1s
  - name: payments.payout
    description: Pay out money; needs a reviewer's approval
    effect: write
    params_schema:
      type: object
      required: [order_id, amount_cents, currency]
      properties:
        order_id: {type: string}
        amount_cents: {type: integer}
        currency: {type: string}
    summary: "{{money .Params.amount_cents .Params.currency}} for order {{.Params.order_id}}"
    http:
      url: "{{SANDBOX}}/refunds"
      timeout: 1s
    review: {require_approval: true}
`

// Gateway is a running gateway under test.
type Gateway struct {
	URL string
	// MetricsURL serves /metrics, on a listener of its own as serve --metrics-addr does.
	MetricsURL string
	Key        string // an API key of tenant "acme" for every tool
	Tenant     string
	Ledger     *models.Ledger
	Sandbox    *sandbox.Sandbox
	Catalog    *catalog.Catalog
	Executor   *jobs.Executor
	Metrics    *telemetry.Metrics
	Client     *http.Client
}

// Options change what Start runs.
type Options struct {
	// Recovery runs the lease reaper, reconciler, escalator and retention sweeps, fast.
	Recovery bool
	// LogTo receives the gateway's JSON log lines (default: discarded).
	LogTo io.Writer
	// RateLimit, when positive, allows each principal that many requests per second, in
	// bursts of RateBurst (default: unlimited).
	RateLimit float64
	RateBurst int
	// TracerProvider makes the gateway's spans (default: an SDK provider that exports
	// nothing, as internal/app makes); pass one with a tracetest.SpanRecorder to look at them.
	TracerProvider trace.TracerProvider
	// Tools is the tools file, {{SANDBOX}} standing for the sandbox's URL (default: Tools).
	Tools string
	// Catalog, when set, builds the catalogue from the sandbox's URL instead (catalog.Demo).
	Catalog func(sandboxURL string) (*catalog.Catalog, error)
	// DataKeys seal sensitive params at rest, as IDEMGATE_DATA_KEY does (default: none).
	DataKeys *datakey.Keyring
	// DB is the ledger's database (default: a fresh one of the test's own, testdb.Open). Two
	// gateways on one DB are two replicas, or one gateway and its restart.
	DB *gorm.DB
	// DownstreamDial makes the gateway's connections to downstreams (default: a net.Dialer).
	DownstreamDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TrustedProxies and AllowedOrigins are serve's --trust-proxy and --allowed-origin.
	TrustedProxies web.TrustedProxies
	AllowedOrigins web.AllowedOrigins
}

// Start runs a gateway on engine d until the test ends: the API, the executor and the
// dispatcher, without the recovery sweeps (so UNKNOWN stays UNKNOWN until a test says).
func Start(t testing.TB, d models.Dialect) *Gateway { return StartWith(t, d, Options{}) }

// StartWith runs a gateway on engine d with opts until the test ends.
func StartWith(t testing.TB, d models.Dialect, opts Options) *Gateway {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sb := sandbox.New()
	sbSrv := httptest.NewServer(sb)
	tools := opts.Tools
	if tools == "" {
		tools = Tools
	}
	logTo := opts.LogTo
	if logTo == nil {
		logTo = io.Discard
	}
	log := slog.New(slog.NewJSONHandler(logTo, nil))
	servers := mcpclient.New(mcpclient.Config{Log: log})
	build := opts.Catalog
	if build == nil {
		build = func(url string) (*catalog.Catalog, error) {
			return catalog.LoadWith([]byte(strings.ReplaceAll(tools, "{{SANDBOX}}", url)), catalog.Options{MCP: servers})
		}
	}
	cat, err := build(sbSrv.URL)
	if err != nil {
		servers.Close()
		t.Fatalf("gatewaytest: catalogue: %v", err)
	}
	jobsCfg := app.Jobs{Dispatch: true, Poll: 20 * time.Millisecond, Concurrency: 16, BudgetsEvery: 50 * time.Millisecond}
	if opts.Recovery {
		jobsCfg.Recovery = &jobs.RecoveryConfig{ReapEvery: 50 * time.Millisecond, ReconcileEvery: 20 * time.Millisecond,
			EscalateEvery: 50 * time.Millisecond, RetainEvery: 100 * time.Millisecond}
	}
	db := opts.DB
	if db == nil {
		db = testdb.Open(t, d)
	}
	gw, err := app.New(ctx, app.Config{DB: db, Dialect: d, Catalog: cat, MCP: servers, Worker: "test-worker",
		Log: log, TracerProvider: opts.TracerProvider, Jobs: jobsCfg, DataKeys: opts.DataKeys, DownstreamDial: opts.DownstreamDial,
		HTTP: &web.Settings{RateLimit: opts.RateLimit, RateBurst: opts.RateBurst,
			TrustedProxies: opts.TrustedProxies, AllowedOrigins: opts.AllowedOrigins}})
	if err != nil {
		servers.Close()
		t.Fatalf("gatewaytest: %v", err)
	}
	done := make(chan struct{})
	go func() { gw.Run(ctx); close(done) }()
	srv := httptest.NewServer(gw.HTTP)
	metrics := httptest.NewServer(gw.Metrics.Handler()) // its own listener, as serve --metrics-addr
	t.Cleanup(func() {
		srv.Close()
		metrics.Close()
		cancel()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		gw.Shutdown(sctx)
		servers.Close()
		sb.ClearFaults()
		sbSrv.Close()
	})
	g := &Gateway{URL: srv.URL, MetricsURL: metrics.URL, Tenant: "acme", Ledger: gw.Ledger, Sandbox: sb, Catalog: cat, Executor: gw.Executor,
		Metrics: gw.Metrics, Client: &http.Client{Timeout: 90 * time.Second}}
	g.Key = g.NewTenant(t, "acme", "agent", nil)
	return g
}

// NewTenant creates tenant (unless it exists) and returns a new key of principal for tools
// (nil: all).
func (g *Gateway) NewTenant(t testing.TB, tenant, principal string, tools []string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := g.Ledger.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, tenant); err != nil && models.ErrorCode(err) != models.CodeConflict {
		t.Fatalf("gatewaytest: tenant: %v", err)
	}
	k, err := g.Ledger.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, tenant, principal, tools)
	if err != nil {
		t.Fatalf("gatewaytest: key: %v", err)
	}
	return k.Secret
}

// Response is an answer read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("gatewaytest: body is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

// Do sends a request with the given key (none when ""), headers and body.
func (g *Gateway) Do(t testing.TB, method, path, key string, header map[string]string, body string) Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequest(method, g.URL+path, rd)
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatalf("gatewaytest: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("gatewaytest: read body: %v", err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Submit posts an operation with key idemKey for tool and params (a JSON object).
func (g *Gateway) Submit(t testing.TB, idemKey, tool, params string, header map[string]string) Response {
	t.Helper()
	h := map[string]string{"Idempotency-Key": idemKey}
	for k, v := range header {
		h[k] = v
	}
	return g.Do(t, http.MethodPost, "/v1/operations", g.Key, h, `{"tool":"`+tool+`","params":`+params+`}`)
}

// Scrape reads /metrics from the metrics listener, as Prometheus would.
func (g *Gateway) Scrape(t testing.TB) string {
	t.Helper()
	resp, err := g.Client.Get(g.MetricsURL + "/metrics")
	if err != nil {
		t.Fatalf("gatewaytest: scrape: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("gatewaytest: scrape: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// Count returns how many operations the ledger holds, across tenants.
func (g *Gateway) Count(t testing.TB) int64 {
	t.Helper()
	var n int64
	if err := g.Ledger.DB().Model(&models.Operation{}).Count(&n).Error; err != nil {
		t.Fatalf("gatewaytest: count: %v", err)
	}
	return n
}

// Eventually polls cond every 20 ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gatewaytest: timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
