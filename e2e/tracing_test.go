package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestTracesAndLogsFollowTheOperation: the request, its ledger writes, its attempt and a
// reconcile probe make spans of the caller's trace; the traceparent the downstream receives
// carries the trace id stored on the attempt; state-change log lines carry the request id
// and trace id; and no span or log line holds a sensitive param, the Idempotency-Key or the
// API key.
func TestTracesAndLogsFollowTheOperation(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		spans := tracetest.NewSpanRecorder()
		logs := &lockedBuffer{}
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Recovery: true, LogTo: logs,
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))})
		const (
			card     = "4111222233334444"
			idemKey  = "secret-idem-key-7f3a"
			callerTr = "4bf92f3577b34da6a3ce929d0e0e4736"
		)
		params := `{"order_id":"t-1","amount_cents":100,"currency":"EUR","card_number":"` + card + `"}`

		// Inline attempt: a child of the request's span, in the caller's trace.
		first := g.Submit(t, idemKey, "refunds.issue", params, map[string]string{"traceparent": "00-" + callerTr + "-00f067aa0ba902b7-01"})
		op := requireOp(t, first, http.StatusCreated)
		id := op["id"].(string)
		attempts, err := g.Ledger.Attempts(context.Background(), id)
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		require.NotNil(t, attempts[0].TraceID)
		assert.Equal(t, callerTr, *attempts[0].TraceID)
		reqs := g.Sandbox.Requests("/refunds")
		require.Len(t, reqs, 1)
		assert.Regexp(t, `^00-`+*attempts[0].TraceID+`-[0-9a-f]{16}-01$`, reqs[0].Header.Get("Traceparent"))

		// Attempt in the background, then a reconcile probe: each sent traceparent carries
		// the trace id recorded on its attempt.
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/refunds", Method: "POST", Count: 1})
		unknown := g.Submit(t, "t:unknown", "refunds.issue", `{"order_id":"t-2","amount_cents":100,"currency":"EUR","card_number":"`+card+`"}`,
			map[string]string{"Prefer": "wait=0"})
		require.Equal(t, http.StatusAccepted, unknown.Status)
		uid := unknown.JSON(t)["id"].(string)
		gatewaytest.Eventually(t, 10*time.Second, "reconciled", func() bool { return opState(t, g, uid).State == models.StateSucceeded })
		uAttempts, err := g.Ledger.Attempts(context.Background(), uid)
		require.NoError(t, err)
		require.Len(t, uAttempts, 1)
		require.NotNil(t, uAttempts[0].TraceID)
		sent := false
		for _, r := range g.Sandbox.Requests("/refunds") {
			if r.Header.Get("X-Request-Id") == uAttempts[0].ID {
				sent = true
				assert.Contains(t, r.Header.Get("Traceparent"), *uAttempts[0].TraceID)
			}
		}
		assert.True(t, sent, "the downstream saw the attempt")

		// Spans: the request, ledger writes, the attempts and a probe.
		var names []string
		gatewaytest.Eventually(t, 5*time.Second, "probe span", func() bool {
			names = names[:0]
			for _, s := range spans.Ended() {
				names = append(names, s.Name())
			}
			return strings.Contains(strings.Join(names, "|"), "reconcile probe")
		})
		for _, want := range []string{"POST /v1/operations", "ledger submit", "ledger finish attempt", "attempt", "ledger record probe"} {
			assert.Contains(t, names, want)
		}
		inline := 0
		for _, s := range spans.Ended() {
			if s.Name() == "attempt" && s.SpanContext().TraceID().String() == callerTr {
				inline++
				assert.True(t, s.Parent().IsValid(), "the inline attempt is the request span's child")
				attrs := map[string]string{}
				for _, a := range s.Attributes() {
					attrs[string(a.Key)] = a.Value.String()
				}
				assert.Equal(t, map[string]string{"idemgate.operation_id": id, "idemgate.tool": "refunds.issue", "idemgate.attempt": "1",
					"idemgate.state": "SUCCEEDED", "http.response.status_code": "201"}, attrs)
			}
			text := s.Name()
			for _, a := range s.Attributes() {
				text += " " + string(a.Key) + "=" + a.Value.String()
			}
			for _, secret := range []string{card, "22223333", idemKey, g.Key} {
				assert.NotContains(t, text, secret, "span %q", s.Name())
			}
		}

		assert.Equal(t, 1, inline, "one attempt span in the caller's trace")

		// Logs: every state change carries its request id and trace id, and no secret.
		var created, finished map[string]any
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m))
			if m["msg"] != "state changed" {
				continue
			}
			assert.NotEmpty(t, m["request_id"], line)
			assert.Len(t, m["trace_id"], 32, line)
			if m["operation_id"] == id && m["from"] == "" {
				created = m
			}
			if m["operation_id"] == id && m["to"] == "SUCCEEDED" {
				finished = m
			}
		}
		require.NotNil(t, created)
		assert.Equal(t, first.Header.Get("X-Request-Id"), created["request_id"])
		assert.Equal(t, callerTr, created["trace_id"])
		require.NotNil(t, finished)
		assert.Equal(t, attempts[0].ID, finished["request_id"])
		assert.Equal(t, *attempts[0].TraceID, finished["trace_id"])
		for _, secret := range []string{card, idemKey, g.Key} {
			assert.NotContains(t, logs.String(), secret)
		}
	})
}
