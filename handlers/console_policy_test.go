package handlers

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgate/idemgate/models"
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
