package rules_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/jobs/catalog/rules"
)

var refunds = rules.Tool{Name: "refunds.issue", Schema: map[string]any{
	"type": "object", "required": []any{"amount_cents", "currency"},
	"properties": map[string]any{
		"amount_cents": map[string]any{"type": "integer"},
		"currency":     map[string]any{"type": "string"},
		"items":        map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"customer":     map[string]any{"type": "object", "properties": map[string]any{"email": map[string]any{"type": "string"}}},
	}}}

var tickets = rules.Tool{Name: "tickets.create", Schema: map[string]any{"type": "object",
	"properties": map[string]any{"subject": map[string]any{"type": "string"}}}}

func call(t *testing.T, tool, params, principal string) rules.Call {
	t.Helper()
	schema := refunds.Schema
	if tool == tickets.Name {
		schema = tickets.Schema
	}
	p, err := rules.Params([]byte(params), schema)
	require.NoError(t, err)
	return rules.Call{Tool: tool, Params: p, Principal: principal, Tenant: "acme", Now: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)}
}

// The README's example: finance-bot exempt, refunds over 10,000.00 denied, over 500.00 held for a
// person; the first rule that matches decides; every matching budget is charged, its scope the
// principal and the currency.
func TestFirstMatchDecidesAndBudgetsCharge(t *testing.T) {
	s, errs := rules.Compile([]rules.Rule{
		{Name: "no-refunds-over-10k", Tools: []string{"refunds.issue"}, When: "params.amount_cents > 1000000", Decision: rules.Deny, Reason: "finance"},
		{Name: "finance-bot", When: `principal == "finance-bot"`, Decision: rules.Allow},
		{Name: "big-refunds", Tools: []string{"refunds.*"}, When: "params.amount_cents > 50000", Decision: rules.RequireApproval, Approvals: 2, Reason: "second pair of eyes"},
	}, []rules.Budget{
		{Name: "per-agent", Tools: []string{"refunds.issue"}, When: `principal != "finance-bot"`, Per: []string{"principal", "params.currency"},
			Amount: "params.amount_cents", Limit: 200000, Window: 24 * time.Hour},
		{Name: "count", Limit: 100, Period: "day"},
	}, []rules.Tool{refunds, tickets})
	require.Empty(t, errs)

	o := s.Evaluate(call(t, "refunds.issue", `{"amount_cents":1999,"currency":"EUR"}`, "agent"))
	assert.Equal(t, rules.Allow, o.Decision)
	assert.Equal(t, "", o.Rule)
	require.Len(t, o.Charges, 2)
	assert.Equal(t, rules.Charge{Budget: "per-agent", Scope: "agent/EUR", Amount: 1999, Limit: 200000, Over: rules.RequireApproval, Window: 24 * time.Hour}, o.Charges[0])
	assert.Equal(t, int64(1), o.Charges[1].Amount, "no amount counts operations")

	o = s.Evaluate(call(t, "refunds.issue", `{"amount_cents":60000,"currency":"EUR"}`, "agent"))
	assert.Equal(t, rules.RequireApproval, o.Decision)
	assert.Equal(t, "big-refunds", o.Rule)
	assert.Equal(t, 2, o.Approvals)

	o = s.Evaluate(call(t, "refunds.issue", `{"amount_cents":60000,"currency":"EUR"}`, "finance-bot"))
	assert.Equal(t, rules.Allow, o.Decision, "an allow placed first exempts from the rules after it")
	assert.Equal(t, "finance-bot", o.Rule)
	assert.Len(t, o.Charges, 1, "the per-agent budget's when excludes finance-bot")

	o = s.Evaluate(call(t, "refunds.issue", `{"amount_cents":2000000,"currency":"EUR"}`, "finance-bot"))
	assert.Equal(t, rules.Deny, o.Decision, "the first match decides, even before an allow")

	o = s.Evaluate(call(t, "tickets.create", `{"subject":"x"}`, "agent"))
	assert.Equal(t, rules.Allow, o.Decision)
	assert.Len(t, o.Charges, 1)
}

// A misspelt field, a type error, a when that is not bool, an amount that is not an int and a
// glob that names no tool are refused at load, naming the entry, the tool and the field.
func TestCompileRefusesWhatCannotBeRight(t *testing.T) {
	for _, c := range []struct {
		rule   rules.Rule
		budget rules.Budget
		want   string
	}{
		{rule: rules.Rule{Name: "typo", Tools: []string{"refunds.issue"}, When: "params.amount_cent > 5", Decision: rules.Deny},
			want: `policy "typo": tool "refunds.issue": when: ` + "ERROR: <input>:1:7: undefined field 'amount_cent'"},
		{rule: rules.Rule{Name: "type", Tools: []string{"refunds.issue"}, When: `params.amount_cents > "x"`, Decision: rules.Deny},
			want: `policy "type": tool "refunds.issue": when: `},
		{rule: rules.Rule{Name: "notbool", Tools: []string{"refunds.issue"}, When: `params.amount_cents`, Decision: rules.Deny},
			want: `when: is int, not bool`},
		{rule: rules.Rule{Name: "other-tool", When: `params.amount_cents > 5`, Decision: rules.Deny},
			want: `policy "other-tool": tool "tickets.create": when:`},
		{rule: rules.Rule{Name: "glob", Tools: []string{"refund.*"}, Decision: rules.Deny}, want: `"refund.*" names no tool`},
		{budget: rules.Budget{Name: "float", Tools: []string{"refunds.issue"}, Amount: "double(params.amount_cents) * 1.5", Limit: 5, Window: time.Hour},
			want: `budget "float": tool "refunds.issue": amount: is double, not int`},
	} {
		var rs []rules.Rule
		var bs []rules.Budget
		if c.rule.Name != "" {
			rs = append(rs, c.rule)
		} else {
			bs = append(bs, c.budget)
		}
		_, errs := rules.Compile(rs, bs, []rules.Tool{refunds, tickets})
		require.NotEmpty(t, errs, c.want)
		var all []string
		for _, e := range errs {
			all = append(all, e.Error())
		}
		assert.Contains(t, strings.Join(all, "\n"), c.want)
	}
}

// An evaluation that passes the cost limit, or fails at run time (a param absent), denies: a
// policy fails closed. A long list does not slow it past the limit.
func TestEvaluationFailsClosed(t *testing.T) {
	s, errs := rules.Compile([]rules.Rule{
		{Name: "bomb", Tools: []string{"refunds.issue"}, When: `params.items.all(x, params.items.all(y, params.items.all(z, x + y + z != "")))`, Decision: rules.Allow},
	}, nil, []rules.Tool{refunds})
	require.Empty(t, errs)
	items := make([]string, 2000)
	for i := range items {
		items[i] = `"` + strings.Repeat("a", 10) + `"`
	}
	start := time.Now()
	o := s.Evaluate(call(t, "refunds.issue", `{"amount_cents":1,"currency":"EUR","items":[`+strings.Join(items, ",")+`]}`, "agent"))
	assert.Equal(t, rules.Deny, o.Decision)
	assert.Equal(t, "bomb", o.Failed)
	require.Error(t, o.Err)
	assert.Contains(t, o.Err.Error(), "cost")
	t.Logf("the cost bomb stopped after %v", time.Since(start))

	s, errs = rules.Compile([]rules.Rule{
		{Name: "nested", Tools: []string{"refunds.issue"}, When: `params.customer.email.endsWith("@example.com")`, Decision: rules.RequireApproval},
	}, nil, []rules.Tool{refunds})
	require.Empty(t, errs)
	o = s.Evaluate(call(t, "refunds.issue", `{"amount_cents":1,"currency":"EUR","customer":{"email":"a@example.com"}}`, "agent"))
	assert.Equal(t, rules.RequireApproval, o.Decision, "nested fields are read")
	o = s.Evaluate(call(t, "refunds.issue", `{"amount_cents":1,"currency":"EUR"}`, "agent"))
	assert.Equal(t, rules.Deny, o.Decision, "an absent field fails closed (has() tests it)")
}

// A rolling window starts at the whole step at or before now less its length (a 1,440th of it,
// at least a second), so it never counts less than its length; a calendar period at its start.
func TestWindowStart(t *testing.T) {
	now := time.Date(2026, 12, 7, 15, 4, 5, 600_000_000, time.UTC)
	day := rules.Charge{Window: 24 * time.Hour}
	assert.Equal(t, time.Minute, rules.WindowStep(24*time.Hour))
	assert.Equal(t, time.Date(2026, 12, 6, 15, 4, 0, 0, time.UTC), day.Since(now))
	assert.Equal(t, day.Since(now), day.Since(now.Add(50*time.Second)), "the start moves once a step")
	assert.Equal(t, time.Second, rules.WindowStep(10*time.Minute))
	assert.Equal(t, time.Date(2026, 12, 7, 14, 54, 5, 0, time.UTC), rules.Charge{Window: 10 * time.Minute}.Since(now))
	assert.Equal(t, time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), rules.Charge{Period: "day"}.Since(now))
	assert.Equal(t, time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), rules.Charge{Period: "week"}.Since(now), "7 December 2026 is a Monday")
}
