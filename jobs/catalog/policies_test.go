package catalog_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/catalog/rules"
)

const policyTools = `
tools:
  - name: refunds.issue
    description: Refund an order
    effect: write
    params_schema:
      type: object
      required: [amount_cents, currency]
      properties:
        amount_cents: {type: integer}
        currency: {type: string}
    http: {url: "http://127.0.0.1:9/refunds", timeout: 1s, idempotency_header: Idempotency-Key}
`

// A tools file's policies and budgets load with its tools; a misspelt field stops the load with
// a message naming the rule, the tool and the field, and so do every other problem of the
// entries, all at once.
func TestToolsFilePoliciesAndBudgets(t *testing.T) {
	c, err := catalog.Load([]byte(policyTools + `
policies:
  - name: big-refunds-need-a-person
    tools: [refunds.issue]
    when: params.amount_cents > 50000
    decision: require_approval
    reason: Refunds over 500.00 need a second pair of eyes.
budgets:
  - name: refunds-per-agent-per-day
    tools: [refunds.issue]
    per: [principal, params.currency]
    amount: params.amount_cents
    limit: 200000
    window: 24h
`))
	require.NoError(t, err)
	require.True(t, c.Rules().Applies("refunds.issue"))
	p, err := rules.Params([]byte(`{"amount_cents":60000,"currency":"EUR"}`), mustTool(t, c, "refunds.issue").ParamsSchemaRaw)
	require.NoError(t, err)
	o := c.Rules().Evaluate(rules.Call{Tool: "refunds.issue", Params: p, Principal: "agent"})
	assert.Equal(t, rules.RequireApproval, o.Decision)
	require.Len(t, o.Charges, 1)
	assert.Equal(t, "agent/EUR", o.Charges[0].Scope)

	_, err = catalog.Load([]byte(policyTools + `
policies:
  - name: typo
    tools: [refunds.issue]
    when: params.amount_cent > 5
    decision: deny
    reason: no
  - name: no-reason
    decision: deny
budgets:
  - name: no-limit
    window: 24h
  - name: unknown-field
    limit: 5
    window: 1h
    windw: 2h
`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `tools file: policy "typo": tool "refunds.issue": when: `)
	assert.Contains(t, err.Error(), `undefined field 'amount_cent'`)
	assert.Contains(t, err.Error(), `policy "no-reason": reason: required`)
	assert.Contains(t, err.Error(), `budget "no-limit": limit: required`)
	assert.Contains(t, err.Error(), `budget "unknown-field": windw`)
}

func mustTool(t *testing.T, c *catalog.Catalog, name string) *catalog.Tool {
	t.Helper()
	tool, ok := c.Get(name)
	require.True(t, ok)
	return tool
}
