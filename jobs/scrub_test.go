package jobs

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestURLErrorScrubbed: a sensitive param templated into a URL path reaches Go's url.Error
// text ("Post \"http://…/cards/CARD%209876…/charge\": dial tcp …"), URL-escaped. The tools
// file refuses such a tool at load, so it is built here in code, as a catalogue written
// before that rule would have had it. The recorded message, the attempt's error and the
// timeline show "***" in its place.
func TestURLErrorScrubbed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		l := testdb.Ledger(t, d)
		_, err := l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
		require.NoError(t, err)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close()) // nothing listens: the request is refused, never sent

		// Digits a loopback port cannot hold (the test once drew port 42425): no "4242" test.
		const secret = "CARD 9876 SECRET"
		tool := &catalog.Tool{Name: "cards.charge", Effect: catalog.EffectWrite, SensitiveParams: []string{"card"},
			HTTP:  catalog.HTTPSpec{Method: http.MethodPost, URL: "http://" + addr + "/cards/{{.Params.card}}/charge", Timeout: time.Second},
			Retry: catalog.RetryPolicy{MaxAttempts: 1, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}}
		params := []byte(`{"card":"` + secret + `"}`)
		s, err := l.Submit(ctx, models.NewOperation{Tenant: "acme", PrincipalID: "p", APIKeyID: "k", Key: "charge-1",
			Tool: tool.Name, Fingerprint: l.Fingerprint(tool.Name, params), Params: params,
			Claim: &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}, Actor: "api:agent"})
		require.NoError(t, err)
		e := NewExecutor(ExecutorConfig{Ledger: l, Worker: "w1"})
		c := models.Claimed{Op: s.Op, Attempt: s.Attempt}

		out := e.attempt(ctx, tool, c)
		require.Equal(t, string(NotSent), out.Class, "%+v", out)
		for _, text := range []string{out.ErrorMessage, out.Error} {
			assert.Contains(t, text, "/cards/***/charge", "the URL is shown with the value masked")
			assert.NotContains(t, text, "SECRET")
		}
		require.NoError(t, e.record(ctx, c, out))

		op, err := l.Get(ctx, "acme", s.Op.ID)
		require.NoError(t, err)
		require.Equal(t, models.StateFailedFinal, op.State)
		recorded := []string{*op.ErrorMessage}
		evs, err := l.Events(ctx, "acme", op.ID)
		require.NoError(t, err)
		for _, ev := range evs {
			if ev.Detail != nil {
				recorded = append(recorded, *ev.Detail)
			}
		}
		atts, err := l.Attempts(ctx, op.ID)
		require.NoError(t, err)
		for _, a := range atts {
			if a.Error != nil {
				recorded = append(recorded, *a.Error)
			}
		}
		all := strings.Join(recorded, "\n")
		assert.Contains(t, all, "***")
		assert.NotContains(t, all, "SECRET", "neither the error message, the events nor the attempts show the card")
	})
}

// TestProbeAnswerScrubbed: what a reconcile look-up finds is recorded scrubbed too, and the
// look-up carries the operation's downstream key.
func TestProbeAnswerScrubbed(t *testing.T) {
	const secret = "4000056655665556"
	var gotKey string
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey = r.Header.Get("X-Idemgate-Downstream-Key")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"R-1","card":"` + secret + `","note":"refunded to ` + secret + `"}`))
	}))
	t.Cleanup(down.Close)
	tool := &catalog.Tool{Name: "refunds.issue", Effect: catalog.EffectWrite, SensitiveParams: []string{"/card_number"},
		HTTP:      catalog.HTTPSpec{Method: http.MethodPost, URL: down.URL + "/refunds", Timeout: time.Second, ResultReference: "/id"},
		Reconcile: &catalog.ReconcileSpec{Method: http.MethodGet, URL: down.URL + "/refunds?reference={{.DownstreamKey}}"},
		Retry:     catalog.RetryPolicy{MaxAttempts: 1}}
	params := `{"card_number":"` + secret + `"}`
	op := &models.Operation{ID: "op_1", Tenant: "acme", Key: "k", Tool: tool.Name, Params: &params,
		DownstreamKey: ptrTo("dk_0123"), State: models.StateUnknown}
	l := testdb.Ledger(t, models.SQLite)
	r := NewRecovery(NewExecutor(ExecutorConfig{Ledger: l, Worker: "w1"}), RecoveryConfig{})

	out := r.ask(context.Background(), tool, op)
	require.Equal(t, models.StateSucceeded, out.To, "%+v", out)
	assert.Equal(t, "dk_0123", gotKey)
	assert.JSONEq(t, `{"id":"R-1","card":"***","note":"refunded to ***"}`, string(out.Result))
	assert.Equal(t, "R-1", out.DownstreamRef)
}

func ptrTo(s string) *string { return &s }

// The settle window is measured when the downstream is asked, not when its answer arrives: a
// look-up sent inside the window proves nothing, however late its 404 comes back (found by
// model-checking the reconciler, docs/model MUT_SETTLE_AT_RECORD).
func TestProbeSettleWindowMeasuredWhenAsked(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		var mu sync.Mutex
		now := t0.Add(100 * time.Millisecond) // asked 100ms into a 1s window
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			now = t0.Add(5 * time.Second) // the answer arrives long after the window
			mu.Unlock()
			http.NotFound(w, r)
		}))
		t.Cleanup(down.Close)
		tool := &catalog.Tool{Name: "refunds.issue", Effect: catalog.EffectWrite,
			HTTP:      catalog.HTTPSpec{Method: http.MethodPost, URL: down.URL + "/refunds", Timeout: time.Second},
			Reconcile: &catalog.ReconcileSpec{Method: http.MethodGet, URL: down.URL + "/refunds?reference={{.DownstreamKey}}", Settle: time.Second},
			Retry:     catalog.RetryPolicy{MaxAttempts: 3}}
		params := `{"order_id":"o-1"}`
		op := &models.Operation{ID: "op_1", Tenant: "acme", Key: "k", Tool: tool.Name, Params: &params, Attempts: 1,
			DownstreamKey: ptrTo("dk_0123"), State: models.StateUnknown, UnknownSince: &t0, Probes: 1}
		r := NewRecovery(NewExecutor(ExecutorConfig{Ledger: testdb.Ledger(t, d), Worker: "w1", Now: clock}), RecoveryConfig{})

		out := r.ask(context.Background(), tool, op)
		assert.Equal(t, ProbeNotSettled, out.Outcome, "%+v", out)
		assert.Equal(t, models.StateUnknown, out.To, "a 404 to a question asked inside the window is not proof")
	})
}
