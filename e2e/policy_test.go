package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
)

// policyTools is the suite's catalogue with the README's example policy: refunds over 10,000.00
// denied, over 500.00 held for a person, and a budget of 2,000.00 a day per agent and currency.
const policyTools = gatewaytest.Tools + `
policies:
  - name: no-refunds-over-10k
    tools: [refunds.issue]
    when: params.amount_cents > 1000000
    decision: deny
    reason: Refunds over 10,000.00 are made by finance, not by agents.
  - name: finance-bot
    when: principal == "finance-bot"
    decision: allow
  - name: big-refunds-need-a-person
    tools: [refunds.issue]
    when: params.amount_cents > 50000
    decision: require_approval
    approvals: 2
    reason: Refunds over 500.00 need a second pair of eyes.
budgets:
  - name: refunds-per-agent-per-day
    tools: [refunds.issue]
    when: principal != "finance-bot"
    per: [principal, params.currency]
    amount: params.amount_cents
    limit: 200000
    window: 24h
`

func refund(order string, cents int) string {
	return fmt.Sprintf(`{"order_id":%q,"amount_cents":%d,"currency":"EUR"}`, order, cents)
}

// Each decision of SPEC 4c on the API, on both engines: a small refund runs; a big one waits
// for a person with review reason policy and its decision recorded on its timeline; one over
// 10,000.00 is 403 policy-denied with rule and reason, records nothing, sends nothing, leaves an
// audit entry, and its key works once the call is allowed; a replay is never re-evaluated.
func TestPolicyDecisions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: policyTools})

		r := g.Submit(t, "small", "refunds.issue", refund("o-1", 1999), nil)
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		assert.Equal(t, "SUCCEEDED", r.JSON(t)["state"])

		r = g.Submit(t, "big", "refunds.issue", refund("o-2", 60000), nil)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		op := r.JSON(t)
		assert.Equal(t, "AWAITING_APPROVAL", op["state"])
		review, _ := op["review"].(map[string]any)
		require.NotNil(t, review, string(r.Body))
		assert.Equal(t, models.ReasonPolicy, review["reason"])
		policy, err := g.Ledger.PolicyOf(t.Context(), op["id"].(string))
		require.NoError(t, err)
		require.NotNil(t, policy)
		assert.Equal(t, "big-refunds-need-a-person", policy.Rule)
		assert.Equal(t, models.PolicyRequireApproval, policy.Decision)
		assert.Equal(t, 2, policy.Approvals, "the rule's own count of reviewers")
		rec, err := g.Ledger.OperationRecord(t.Context(), models.AllTenants(), op["id"].(string))
		require.NoError(t, err)
		require.NotNil(t, rec.Op.Policy, "the console's record carries the decision, for its count of approvals")
		assert.Equal(t, 2, rec.Op.Policy.Approvals)
		events, err := g.Ledger.Events(t.Context(), "acme", op["id"].(string))
		require.NoError(t, err)
		var types []string
		for _, e := range events {
			types = append(types, e.Type)
		}
		assert.Contains(t, types, models.EventPolicyDecided)

		before := g.Count(t)
		r = g.Submit(t, "huge", "refunds.issue", refund("o-3", 2000000), nil)
		require.Equal(t, http.StatusForbidden, r.Status, string(r.Body))
		p := r.JSON(t)
		assert.Equal(t, "/problems/policy-denied", p["type"])
		assert.Equal(t, "no-refunds-over-10k", p["rule"])
		assert.Equal(t, "Refunds over 10,000.00 are made by finance, not by agents.", p["reason"])
		assert.Equal(t, before, g.Count(t), "nothing recorded")
		assert.Equal(t, 1, g.Sandbox.Committed("refunds"), "nothing sent: only the small refund ran")
		entries, _, err := g.Ledger.AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Action: models.AuditPolicyDenied, Limit: 10})
		require.NoError(t, err)
		require.Len(t, entries, 1)
		assert.Contains(t, entries[0].Detail, `"rule":"no-refunds-over-10k"`)
		assert.Contains(t, entries[0].Detail, `"key":"huge"`)

		// The same key, once the call is one the policy allows (another amount), is new.
		r = g.Submit(t, "huge", "refunds.issue", refund("o-3", 2500), nil)
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		// A replay answers what was recorded: "small" is not evaluated again.
		r = g.Submit(t, "small", "refunds.issue", refund("o-1", 1999), nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		assert.Equal(t, 2, g.Sandbox.Committed("refunds"))
	})
}

// Budgets are atomic with the ledger: 200 refunds of 1,000 cents at once against one scope with a
// limit of 50,000 count exactly 50,000: 50 run, the other 150 wait for a person, none is
// counted past the limit (SPEC 4c). Both engines; on PostgreSQL with group commit on.
func TestBudgetHoldsUnderConcurrency(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: budgetTools})
		counts := sendRefunds(t, []*gatewaytest.Gateway{g}, g.Key, 200)
		var held, counted int64
		require.NoError(t, g.Ledger.DB().Raw("SELECT count(*) FROM operations WHERE state = 'AWAITING_APPROVAL'").Scan(&held).Error)
		used, err := g.Ledger.BudgetUsage(t.Context(), "acme", "refunds-per-agent", "agent", time.Now().Add(-time.Hour))
		require.NoError(t, err)
		require.NoError(t, g.Ledger.DB().Raw("SELECT count(*) FROM operations WHERE state <> 'AWAITING_APPROVAL'").Scan(&counted).Error)
		assert.Equal(t, int64(50000), used, "exactly the limit: no overspend, no underuse (answers %v)", counts)
		assert.Equal(t, int64(50), counted)
		assert.Equal(t, int64(150), held, "answers %v", counts)
		countersExact(t, g.Ledger)
		gatewaytest.Eventually(t, 30*time.Second, "the 50 allowed refunds to run", func() bool { return g.Sandbox.Committed("refunds") == 50 })
	})
}

// An approval is no licence for what the policy has since forbidden: a refund held for a person
// under one tools file is approved after a restart with a file that denies it; the worker that
// claims it ends it FAILED_FINAL policy_denied without sending anything. Both engines.
func TestApprovedOperationCheckedAgainstTodaysPolicy(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		db := testdb.Open(t, d)
		var op *models.Operation
		t.Run("before the restart", func(t *testing.T) { // the gateway stops as the subtest ends
			held := gatewaytest.StartWith(t, d, gatewaytest.Options{DB: db, Tools: policyTools})
			r := held.Submit(t, "big", "refunds.issue", refund("o-9", 60000), nil)
			require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
			var err error
			op, err = held.Ledger.GetByKey(t.Context(), "acme", "big")
			require.NoError(t, err)
		})
		require.NotNil(t, op)

		// The next release of the file: refunds over 500.00 are finance's alone.
		stricter := gatewaytest.Tools + `
policies:
  - name: finance-only
    tools: [refunds.issue]
    when: params.amount_cents > 50000
    decision: deny
    reason: Refunds over 500.00 are made by finance now.
`
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{DB: db, Tools: stricter})
		_, err := g.Ledger.Approve(t.Context(), models.Action{Scope: models.AllTenants(), Tenant: "acme", OperationID: op.ID,
			Actor: "user:rita@example.com", Reason: "looks right", ExpectedState: op.State, ExpectedAttempts: op.Attempts}, 1, time.Hour)
		require.NoError(t, err)
		gatewaytest.Eventually(t, 30*time.Second, "the approved refund to end", func() bool {
			got, err := g.Ledger.Get(t.Context(), "acme", op.ID)
			return err == nil && got.State.Terminal()
		})
		got, err := g.Ledger.Get(t.Context(), "acme", op.ID)
		require.NoError(t, err)
		assert.Equal(t, models.StateFailedFinal, got.State)
		require.NotNil(t, got.ErrorClass)
		assert.Equal(t, models.ErrorPolicyDenied, *got.ErrorClass)
		assert.Contains(t, *got.ErrorMessage, "finance-only")
		assert.Zero(t, g.Sandbox.Committed("refunds"), "nothing was sent")
	})
}

// A tenant's own limit (idemgate budget set) replaces the file's from the next operation, and
// unset returns to the file's. Both engines.
func TestTenantBudgetLimit(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: policyTools})
		cli := models.Requester{Actor: models.ActorCLI}
		require.NoError(t, g.Ledger.SetBudgetLimit(t.Context(), models.AllTenants(), cli, "acme", "refunds-per-agent-per-day", 3000))
		r := g.Submit(t, "a", "refunds.issue", refund("o-1", 2000), nil)
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		// The agent sees the room it has left (GET /v1/budgets).
		r = g.Do(t, http.MethodGet, "/v1/budgets", g.Key, nil, "")
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		assert.JSONEq(t, `{"budgets":[{"name":"refunds-per-agent-per-day","limit":3000,"window":"24h0m0s","scope":"agent/EUR","used":2000,"remaining":1000}]}`, string(r.Body))
		r = g.Submit(t, "b", "refunds.issue", refund("o-2", 2000), nil)
		require.Equal(t, http.StatusAccepted, r.Status, "2,000 + 2,000 passes the tenant's 3,000: %s", r.Body)
		assert.Equal(t, "AWAITING_APPROVAL", r.JSON(t)["state"])
		policy, err := g.Ledger.PolicyOf(t.Context(), r.JSON(t)["id"].(string))
		require.NoError(t, err)
		require.Len(t, policy.Budgets, 1)
		assert.Equal(t, models.BudgetUse{Name: "refunds-per-agent-per-day", Scope: "agent/EUR", Amount: 2000, Used: 2000, Limit: 3000,
			Decision: models.PolicyRequireApproval}, policy.Budgets[0])
		// The gauge: 2,000 of the tenant's 3,000 counted; the decisions counted by rule.
		gatewaytest.Eventually(t, 10*time.Second, "the budget's usage gauge", func() bool {
			return strings.Contains(g.Scrape(t), `idemgate_budget_usage_ratio{budget="refunds-per-agent-per-day"} 0.6666666666666666`)
		})
		assert.Contains(t, g.Scrape(t), `idemgate_policy_decisions_total{decision="allow",rule="none"} 2`)
		require.NoError(t, g.Ledger.UnsetBudgetLimit(t.Context(), models.AllTenants(), cli, "acme", "refunds-per-agent-per-day"))
		r = g.Submit(t, "c", "refunds.issue", refund("o-3", 2000), nil)
		require.Equal(t, http.StatusCreated, r.Status, "the file's 200,000 again: %s", r.Body)
	})
}

// On /mcp a call a policy denies is an error result whose text gives the reason and whose
// structured content is the policy-denied problem; nothing is recorded or sent. Both engines.
func TestMCPPolicyDenied(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: policyTools})
		s := mcpSession(t, g, g.Key)
		res := callTool(t, s, "refunds.issue", "mcp-huge", map[string]any{"order_id": "o-1", "amount_cents": 2000000, "currency": "EUR"})
		require.True(t, res.IsError)
		assert.Contains(t, resultText(res), "Refunds over 10,000.00 are made by finance, not by agents.")
		p := structured(t, res)
		assert.Equal(t, "/problems/policy-denied", p["type"])
		assert.Equal(t, "no-refunds-over-10k", p["rule"])
		assert.Zero(t, g.Count(t))
		assert.Zero(t, g.Sandbox.Committed("refunds"))
	})
}

// budgetTools is a single budget of 50,000 cents per agent, for the concurrency tests.
const budgetTools = gatewaytest.Tools + `
budgets:
  - name: refunds-per-agent
    tools: [refunds.issue]
    per: [principal]
    amount: params.amount_cents
    limit: 50000
    window: 24h
`

// countersExact asserts that every budget counter equals what the charges and the operations'
// states recompute (models/budget_counters.go): what a charge read is what was counted.
func countersExact(t *testing.T, l *models.Ledger) {
	t.Helper()
	drifts, err := l.BudgetDrifts(t.Context())
	require.NoError(t, err)
	assert.Empty(t, drifts, "budget counters that differ from the recomputed sums")
	var counters int64
	require.NoError(t, l.DB().Raw("SELECT count(*) FROM budget_counters").Scan(&counters).Error)
	assert.Positive(t, counters, "the charges were counted in counters")
}

// sendRefunds sends n refunds of 1,000 cents at once, spread over gateways, each re-sent with
// the same key after a 503 as a careful agent does, and returns the answers' statuses.
func sendRefunds(t *testing.T, gws []*gatewaytest.Gateway, key string, n int) map[int]int {
	t.Helper()
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := gws[i%len(gws)]
			var r gatewaytest.Response
			for try := 0; try < 20; try++ {
				r = g.Do(t, http.MethodPost, "/v1/operations", key, map[string]string{"Idempotency-Key": fmt.Sprintf("k-%d", i), "Prefer": "wait=0"},
					`{"tool":"refunds.issue","params":`+refund(fmt.Sprintf("o-%d", i), 1000)+`}`)
				if r.Status != http.StatusServiceUnavailable {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			statuses[i] = r.Status
		}()
	}
	wg.Wait()
	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	return counts
}

// Two replicas on one PostgreSQL ledger (group commit on) charge one scope value at once: the
// budget counts exactly its limit, never more, however the requests fall between them.
func TestBudgetHoldsAcrossReplicas(t *testing.T) {
	db := testdb.Open(t, models.Postgres)
	a := gatewaytest.StartWith(t, models.Postgres, gatewaytest.Options{DB: db, Tools: budgetTools})
	b := gatewaytest.StartWith(t, models.Postgres, gatewaytest.Options{DB: db, Tools: budgetTools})
	counts := sendRefunds(t, []*gatewaytest.Gateway{a, b}, a.Key, 200)
	used, err := a.Ledger.BudgetUsage(t.Context(), "acme", "refunds-per-agent", "agent", time.Now().Add(-time.Hour))
	require.NoError(t, err)
	assert.Equal(t, int64(50000), used, "exactly the limit across replicas (answers %v)", counts)
	var held int64
	require.NoError(t, db.Raw("SELECT count(*) FROM operations WHERE state = 'AWAITING_APPROVAL'").Scan(&held).Error)
	assert.Equal(t, int64(150), held)
	countersExact(t, a.Ledger)
}

// Refunds the downstream rejects end FAILED_FINAL and give their amounts back: what is counted
// is only what may have taken effect, and it never passes the limit. Both engines.
func TestBudgetGivesBackFailedOperations(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: budgetTools})
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeReject, Path: "/refunds", Method: http.MethodPost, Count: 30})
		counts := sendRefunds(t, []*gatewaytest.Gateway{g}, g.Key, 120)
		gatewaytest.Eventually(t, 30*time.Second, "every admitted refund to end", func() bool {
			var open int64
			require.NoError(t, g.Ledger.DB().Raw("SELECT count(*) FROM operations WHERE state IN ('PENDING','RUNNING')").Scan(&open).Error)
			return open == 0
		})
		used, err := g.Ledger.BudgetUsage(t.Context(), "acme", "refunds-per-agent", "agent", time.Now().Add(-time.Hour))
		require.NoError(t, err)
		var succeeded, failed int64
		require.NoError(t, g.Ledger.DB().Raw("SELECT count(*) FROM operations WHERE state = 'SUCCEEDED'").Scan(&succeeded).Error)
		require.NoError(t, g.Ledger.DB().Raw("SELECT count(*) FROM operations WHERE state = 'FAILED_FINAL'").Scan(&failed).Error)
		assert.Equal(t, int64(30), failed, "the rejected refunds (answers %v)", counts)
		assert.Equal(t, succeeded*1000, used, "only what took effect is counted: the failed ones gave theirs back")
		assert.LessOrEqual(t, used, int64(50000), "never past the limit")
		assert.Equal(t, int(succeeded), g.Sandbox.Committed("refunds"))
		countersExact(t, g.Ledger)
	})
}

// An export carries each operation's policy member as the API answers it.
func TestExportCarriesThePolicy(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Tools: policyTools})
		r := g.Submit(t, "big", "refunds.issue", refund("o-1", 60000), nil)
		require.Equal(t, http.StatusAccepted, r.Status)
		batch, err := g.Ledger.ExportBatch(t.Context(), models.AllTenants(), models.ExportFilter{}, "", 10)
		require.NoError(t, err)
		require.Len(t, batch, 1)
		require.NotNil(t, batch[0].Op.Policy)
		assert.Equal(t, "big-refunds-need-a-person", batch[0].Op.Policy.Rule)
		assert.Equal(t, models.PolicyRequireApproval, batch[0].Op.Policy.Decision)
	})
}
