package catalog

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sandbox = "http://127.0.0.1:8080/sandbox"

func TestDemoCatalogue(t *testing.T) {
	t.Parallel()
	c := Demo(sandbox + "/")
	assert.Equal(t, []string{"tickets.create", "tickets.close", "tickets.get", "refunds.issue", "payments.payout", "email.send"}, c.Names())

	for _, tl := range c.Tools() {
		assert.LessOrEqual(t, tl.HTTP.Timeout, 2*time.Second, tl.Name)
		wantMethod := "POST"
		if tl.Effect == EffectRead {
			wantMethod = "GET"
		}
		assert.Equal(t, wantMethod, tl.HTTP.Method, tl.Name)
		_, strict := tl.StrictParameters()
		assert.True(t, strict, "%s: every demo tool can be offered in OpenAI's strict mode", tl.Name)
		assert.Equal(t, "/id", tl.HTTP.ResultReference, tl.Name)
		assert.Equal(t, false, tl.ParamsSchemaRaw["additionalProperties"], tl.Name)
		assert.NotEmpty(t, tl.ParamsSchemaRaw["required"], tl.Name)
	}

	create, _ := c.Get("tickets.create")
	assert.Equal(t, EffectWrite, create.Effect)
	assert.Equal(t, "Idempotency-Key", create.HTTP.IdempotencyHeader)
	assert.True(t, create.RetrySafe())
	assert.Equal(t, time.Second, create.Reconcile.Settle)
	assert.Equal(t, "tickets.close", create.Compensation.Tool)

	closeT, _ := c.Get("tickets__close")
	assert.Equal(t, EffectIdempotent, closeT.Effect)

	get, _ := c.Get("tickets.get")
	assert.Equal(t, EffectRead, get.Effect, "the demo has a read tool, so a call without a key can be tried")
	assert.True(t, get.RetrySafe())
	assert.Nil(t, get.Compensation)

	refund, _ := c.Get("refunds.issue")
	assert.False(t, refund.RetrySafe(), "the sandbox ignores keys for refunds")
	assert.Equal(t, []string{"/card_number"}, refund.SensitiveParams)
	assert.Equal(t, RetryPolicy{MaxAttempts: 4, InitialBackoff: 200 * time.Millisecond, MaxBackoff: 5 * time.Second, UnsentFor: DefaultUnsentFor}, refund.Retry)
	assert.Equal(t, 2*time.Second, refund.Reconcile.Settle)
	assert.False(t, refund.Review.RequireApproval)

	payout, _ := c.Get("payments.payout")
	assert.True(t, payout.Review.RequireApproval)
	assert.Equal(t, 1, payout.Review.Approvals)
	assert.Equal(t, []string{"/card_number"}, payout.SensitiveParams)

	email, _ := c.Get("email.send")
	assert.Nil(t, email.Reconcile, "nothing to ask: an unknown send goes to a human")
	assert.False(t, email.RetrySafe())

	// Refunds and payouts (no key support) ask first whether the effect exists already;
	// tickets (keys honoured) and emails (nothing to ask) do not.
	for name, want := range map[string]bool{"refunds.issue": true, "payments.payout": true, "tickets.create": false,
		"tickets.close": false, "tickets.get": false, "email.send": false} {
		tl, _ := c.Get(name)
		assert.Equal(t, want, tl.ChecksBeforeSending(), name)
	}
}

func TestDemoURLs(t *testing.T) {
	t.Parallel()
	c := Demo(sandbox)
	data := TemplateData{OperationID: "op_01J", DownstreamKey: "dk_4f1c", Params: map[string]any{"ticket_id": "T-1001"}, Result: map[string]any{"id": "T-1001"}}
	// Look-ups name the downstream key, which outlives a lost record (docs/STATES.md, docs/TOOLS.md).
	urls := map[string][2]string{
		"tickets.create":  {sandbox + "/tickets", sandbox + "/tickets?reference=dk_4f1c"},
		"tickets.close":   {sandbox + "/tickets/T-1001/close", ""},
		"tickets.get":     {sandbox + "/tickets/T-1001", ""},
		"refunds.issue":   {sandbox + "/refunds", sandbox + "/refunds?reference=dk_4f1c"},
		"payments.payout": {sandbox + "/refunds", sandbox + "/refunds?reference=dk_4f1c"},
		"email.send":      {sandbox + "/emails", ""},
	}
	for name, want := range urls {
		tl, ok := c.Get(name)
		require.True(t, ok, name)
		got, err := tl.RenderURL(data)
		require.NoError(t, err, name)
		assert.Equal(t, want[0], got, name)
		if want[1] != "" {
			got, err = tl.RenderReconcileURL(data)
			require.NoError(t, err, name)
			assert.Equal(t, want[1], got, name)
		}
	}

	// The console's "Look it up" opens the sandbox's page for people, not the API's JSON
	// (which a fault answers 500), filtered to the reference.
	for _, name := range []string{"tickets.create", "refunds.issue", "payments.payout"} {
		tl, _ := c.Get(name)
		assert.Equal(t, sandbox+"/?reference=dk_4f1c", tl.ReferenceURL(data), name)
	}

	create, _ := c.Get("tickets.create")
	comp, err := create.RenderCompensation(data)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"ticket_id": "T-1001", "reason": "compensation for op_01J"}, comp)
	closeT, _ := c.Get(create.Compensation.Tool)
	assert.Empty(t, closeT.ValidateParams(comp), "the compensation params fit tickets.close")
}

func TestDemoSchemas(t *testing.T) {
	t.Parallel()
	c := Demo(sandbox)
	tests := []struct {
		tool, params string
		want         []ParamError
	}{
		{"tickets.create", `{"subject": "Printer on fire", "priority": "high"}`, []ParamError{}},
		{"tickets.create", `{"subject": "", "priority": "asap"}`, []ParamError{
			{"/priority", "value must be one of 'low', 'normal', 'high', 'urgent'"},
			{"/subject", "minLength: got 0, want 1"},
		}},
		{"tickets.close", `{"ticket_id": "T-1001", "reason": "done"}`, []ParamError{}},
		{"refunds.issue", `{"order_id": "O-1", "amount_cents": 1999, "currency": "EUR", "card_number": "4111111111111111"}`, []ParamError{}},
		{"refunds.issue", `{"order_id": "O-1", "amount_cents": 0, "currency": "euro"}`, []ParamError{
			{"/amount_cents", "minimum: got 0, want 1"},
			{"/currency", "'euro' does not match pattern '^[A-Z]{3}$'"},
		}},
		{"payments.payout", `{"order_id": "O-1", "amount_cents": 500, "currency": "USD"}`, []ParamError{{"/card_number", "required property is missing"}}},
		{"email.send", `{"to": "ada@example.com", "subject": "Hi", "body": "Hello"}`, []ParamError{}},
		{"email.send", `{"to": "ada", "subject": "Hi", "body": "Hello"}`, []ParamError{{"/to", "'ada' is not valid email: missing @"}}},
	}
	for _, tc := range tests {
		tl, ok := c.Get(tc.tool)
		require.True(t, ok)
		assert.Equal(t, tc.want, tl.ValidateParams(decode(t, tc.params)), "%s %s", tc.tool, tc.params)
	}

	refund, _ := c.Get("refunds.issue")
	masked, err := refund.MaskJSON([]byte(`{"order_id":"O-1","amount_cents":1999,"currency":"EUR","card_number":"4111111111111111"}`))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(masked, &m))
	assert.Equal(t, "***", m["card_number"])
}

func TestDemoRejectsBadBaseURL(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"", "/sandbox", "ftp://x", "http://{{.Key}}"} {
		assert.Panics(t, func() { Demo(base) }, base)
	}
}
