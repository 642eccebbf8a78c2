package handlers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
)

// An operation a policy holds says why on its page, in the operator's words first: the rule's
// reason, then a budget's count. One the policy let through, or no policy touched, says nothing
// of it.
func TestPolicyWhy(t *testing.T) {
	ev := func(detail string) []models.Event {
		return []models.Event{{Type: models.EventCreated}, {Type: models.EventPolicyDecided, Detail: &detail}}
	}
	assert.Equal(t, "Refunds over 500.00 need a second pair of eyes. (rule big-refunds)",
		policyWhy(ev(`{"rule":"big-refunds","decision":"require_approval","reason":"Refunds over 500.00 need a second pair of eyes.","budgets":null}`)))
	assert.Equal(t, "The budget per-agent of agent/EUR has 2000 of 3000 counted; this one adds 2000.",
		policyWhy(ev(`{"rule":"","decision":"require_approval","reason":"","budgets":[{"name":"per-agent","scope":"agent/EUR","amount":2000,"used":2000,"limit":3000,"decision":"require_approval"}]}`)))
	assert.Empty(t, policyWhy(ev(`{"rule":"","decision":"allow","reason":"","budgets":[{"name":"per-agent","scope":"agent/EUR","amount":20,"used":0,"limit":3000,"decision":"allow"}]}`)))
	assert.Empty(t, policyWhy([]models.Event{{Type: models.EventCreated}}))
}

// The review queue puts a policy's reason first on the row of an operation it holds, and counts
// approvals against the rule's own number.
func TestQueueSaysWhyAPolicyHolds(t *testing.T) {
	cat, err := catalog.Load([]byte(`
tools:
  - name: refunds.issue
    description: Refund an order
    effect: write
    params_schema: {type: object, properties: {amount_cents: {type: integer}}}
    http: {url: "http://127.0.0.1:9/refunds", timeout: 1s, idempotency_header: Idempotency-Key}
`))
	require.NoError(t, err)
	h := &Console{Catalog: cat}
	detail := `{"rule":"big-refunds","decision":"require_approval","reason":"Refunds over 500.00 need a second pair of eyes.","budgets":null,"approvals":2}`
	events := []models.Event{{Type: models.EventCreated}, {Type: models.EventPolicyDecided, Detail: &detail}}
	params := `{"amount_cents":60000}`
	var row views.ReviewRow
	h.queueFacts(&row, models.QueueItem{OperationID: "op_1", Tool: "refunds.issue", State: models.StateAwaitingApproval, Params: &params,
		Reason: models.ReasonPolicy}, events, &Viewer{ID: "usr_1", Email: "rita@example.com"}, time.Now())
	assert.Equal(t, "Refunds over 500.00 need a second pair of eyes. (rule big-refunds)", row.Evidence)
	assert.Equal(t, "0 of 2", row.Approvals, "the rule's own count of reviewers")
}
