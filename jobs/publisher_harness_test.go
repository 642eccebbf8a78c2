package jobs_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

const webhookCatalogue = `
tools:
  - name: refunds.issue
    description: Refund an order
    effect: write
    params_schema: {type: object}
    sensitive_params: [card_number]
    http: {url: "http://127.0.0.1:9/refunds", timeout: 1s}
`

const cardNumber = "4111111111111111"

// fakeClock is a clock tests move by hand, shared by the ledger and the publisher, so
// backoff, leases and windows pass without sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Now().UTC()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// world is a ledger wired as serve wires it, with tenant acme and an API key.
type world struct {
	ledger *models.Ledger
	caller *models.Caller
}

func newWorld(t *testing.T, d models.Dialect, db *gorm.DB, clock func() time.Time) *world {
	t.Helper()
	cat, err := catalog.Load([]byte(webhookCatalogue))
	require.NoError(t, err)
	l := models.New(models.Config{DB: db, Dialect: d, Now: clock, Payloads: opview.Payloads(cat)})
	ctx := context.Background()
	_, err = l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
	require.NoError(t, err)
	k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent", nil)
	require.NoError(t, err)
	c, err := l.Authenticate(ctx, k.Secret)
	require.NoError(t, err)
	return &world{ledger: l, caller: c}
}

// subscribe subscribes url to operation.succeeded and returns the subscription and its secret.
func (w *world) subscribe(t *testing.T, url string) (models.WebhookSubscription, string) {
	t.Helper()
	s, err := w.ledger.CreateWebhook(context.Background(), models.AllTenants(), models.Requester{Actor: "cli"},
		models.NewWebhook{Tenant: "acme", URL: url, Events: []string{models.WebhookOperationSucceeded}, AllowPrivate: true})
	require.NoError(t, err)
	return s.Subscription, s.Secret
}

// succeed records an operation that succeeds: one operation.succeeded message.
func (w *world) succeed(t *testing.T, key string) *models.Operation {
	t.Helper()
	ctx := context.Background()
	s, err := w.ledger.Submit(ctx, models.NewOperation{Tenant: "acme", PrincipalID: w.caller.PrincipalID, APIKeyID: w.caller.Key.ID,
		Key: key, Tool: "refunds.issue", Fingerprint: "sha256:" + key,
		Params: []byte(`{"order_id":"` + key + `","card_number":"` + cardNumber + `"}`),
		Claim:  &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute},
		Actor:  w.caller.Actor(),
	})
	require.NoError(t, err)
	require.NoError(t, w.ledger.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", models.AttemptOutcome{
		Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded, Result: []byte(`{"id":"R-1"}`)}))
	return s.Op
}

// deliveries lists every delivery, newest first.
func (w *world) deliveries(t *testing.T) []models.DeliveryRow {
	t.Helper()
	rows, err := w.ledger.WebhookDeliveries(context.Background(), models.AllTenants(), models.DeliveryFilter{Limit: 500})
	require.NoError(t, err)
	return rows
}

// attempts returns the recorded attempts of delivery id.
func (w *world) attempts(t *testing.T, id string) []models.WebhookAttempt {
	t.Helper()
	m, err := w.ledger.WebhookAttempts(context.Background(), []string{id})
	require.NoError(t, err)
	return m[id]
}

func (w *world) publisher(name string, clock func() time.Time, tweak func(*jobs.PublisherConfig)) *jobs.Publisher {
	cfg := jobs.PublisherConfig{Ledger: w.ledger, Worker: name, Now: clock, Timeout: 2 * time.Second, LeaseMargin: 2 * time.Second,
		Window: time.Minute, InitialBackoff: time.Second, MaxBackoff: 8 * time.Second, Jitter: func() float64 { return 0.5 },
		Every: 10 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if tweak != nil {
		tweak(&cfg)
	}
	return jobs.NewPublisher(cfg)
}

// receipt is one request a receiver accepted as authentic.
type receipt struct {
	ID        string
	Timestamp int64
	Body      []byte
}

// receiver is a webhook endpoint on loopback that verifies every signature with its own
// verifier (not the publisher's signer) and answers with the statuses of its script, in turn;
// the last status repeats.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	script []int
	got    []receipt
	forged int
}

func newReceiver(t *testing.T, script ...int) *receiver {
	t.Helper()
	r := &receiver{t: t, script: script}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) setSecret(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret = s
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ts, err := verifyStandardWebhook(r.secret, req.Header, body)
	if err != nil {
		r.forged++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	r.got = append(r.got, receipt{ID: id, Timestamp: ts, Body: body})
	status := http.StatusOK
	if len(r.script) > 0 {
		status = r.script[min(len(r.got), len(r.script))-1]
	}
	w.WriteHeader(status)
}

func (r *receiver) receipts() []receipt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receipt(nil), r.got...)
}

// verifyStandardWebhook checks a request the way a receiver following the Standard Webhooks
// specification does, written independently of the publisher's code: HMAC-SHA256 keyed with
// the base64-decoded part of the secret after "whsec_", over "id.timestamp.body", compared in
// constant time against each space-separated "v1,<base64>" signature.
func verifyStandardWebhook(secret string, h http.Header, body []byte) (string, int64, error) {
	id, tsText, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || tsText == "" || sigs == "" {
		return "", 0, errors.New("missing webhook headers")
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil || ts < 1_700_000_000 {
		return "", 0, errors.New("bad webhook-timestamp")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", 0, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + tsText + "." + string(body)))
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return id, ts, nil
		}
	}
	return "", 0, errors.New("no valid signature")
}

// payload decodes a delivery body.
type payload struct {
	Type       string    `json:"type"`
	OccurredAt time.Time `json:"occurred_at"`
	Tenant     string    `json:"tenant"`
	Data       struct {
		Operation map[string]any `json:"operation"`
	} `json:"data"`
}

func decodePayload(t *testing.T, b []byte) payload {
	t.Helper()
	var p payload
	require.NoError(t, json.Unmarshal(b, &p))
	return p
}

// fakeDNS answers look-ups from a fixed table.
type fakeDNS map[string]string

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}
