package models_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
)

// A budget counter follows everything its usage depends on, on both engines: charges, an end in
// FAILED_FINAL (given back), an approval (counted), the window moving forward past charges and
// back over them (a replica whose clock is behind), and a state change of a charge the window
// has left (nothing to give back). After each step the counter equals the sum recomputed from the
// charges and the operations' states, and each decision is the one that sum implies.
func TestBudgetCounterFollowsStatesAndWindow(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		t0 := time.Now().UTC().Truncate(time.Second)
		clk := &handClock{t: t0}
		l := models.New(models.Config{DB: testdb.Open(t, d), Dialect: d, Now: clk.Now})
		c := agentOf(ctx, t, l)

		submit := func(key string, since time.Time) *models.Operation {
			t.Helper()
			in := newOp(c, key)
			in.Claim = &models.ClaimSpec{Worker: "w", LeaseFor: time.Minute}
			in.Policy = &models.PolicyDecision{Decision: models.PolicyAllow, Budgets: []models.BudgetUse{{
				Name: "per-agent", Scope: "agent-1", Amount: 100, Limit: 250, Since: since, Over: models.PolicyRequireApproval}}}
			s, err := l.Submit(ctx, in)
			require.NoError(t, err)
			require.True(t, s.Created)
			return s.Op
		}
		setState := func(op *models.Operation, st models.State) {
			t.Helper()
			require.NoError(t, l.DB().Exec("UPDATE operations SET state = ? WHERE id = ?", st, op.ID).Error)
		}
		counted := func(want int64, step string) {
			t.Helper()
			drifts, err := l.BudgetDrifts(ctx)
			require.NoError(t, err)
			assert.Empty(t, drifts, "%s: the counter equals the recomputed sum", step)
			var used int64
			require.NoError(t, l.DB().Raw("SELECT used FROM budget_counters WHERE budget = 'per-agent'").Scan(&used).Error)
			assert.Equal(t, want, used, step)
		}

		a, b := submit("a", t0.Add(-time.Hour)), submit("b", t0.Add(-time.Hour))
		cOp := submit("c", t0.Add(-time.Hour))
		assert.Equal(t, models.StateRunning, b.State)
		assert.Equal(t, models.StateAwaitingApproval, cOp.State, "200 counted, 100 more passes 250")
		assert.Equal(t, int64(200), cOp.Policy.Budgets[0].Used)
		counted(200, "two charges counted, the held one not yet")

		setState(a, models.StateFailedFinal)
		counted(100, "a failed operation gives its amount back")
		setState(cOp, models.StatePending)
		counted(200, "an approved operation counts")

		clk.Advance(2 * time.Hour)
		dOp := submit("d", clk.Now().Add(-time.Hour))
		assert.Equal(t, models.StateRunning, dOp.State, "the window moved past every earlier charge")
		assert.Equal(t, int64(0), dOp.Policy.Budgets[0].Used)
		counted(100, "only d is in the window")

		eOp := submit("e", t0.Add(-30*time.Minute))
		assert.Equal(t, int64(300), eOp.Policy.Budgets[0].Used, "a window moved back counts b and c again")
		assert.Equal(t, models.StateAwaitingApproval, eOp.State)
		counted(300, "b, c and d")

		fOp := submit("f", clk.Now().Add(-time.Hour))
		assert.Equal(t, int64(100), fOp.Policy.Budgets[0].Used)
		counted(200, "d and f")
		setState(b, models.StateFailedFinal)
		counted(200, "b left the window: failing gives nothing back twice")
		setState(fOp, models.StateSucceeded)
		counted(200, "RUNNING to SUCCEEDED changes nothing")
		setState(fOp, models.StateFailedFinal)
		counted(100, "f given back")
	})
}

// A counter made where charges are already recorded (charges of a release before the counters,
// or a scope value whose counter was never made) counts them from the start.
func TestBudgetCounterOfEarlierCharges(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		l, c := setup(t, d)
		for i := range 3 {
			in := newOp(c, fmt.Sprintf("k-%d", i))
			in.Policy = &models.PolicyDecision{Decision: models.PolicyAllow, Budgets: []models.BudgetUse{{
				Name: "per-agent", Scope: "agent-1", Amount: 100, Limit: 1000, Since: time.Now().Add(-time.Hour), Over: models.PolicyDeny}}}
			_, err := l.Submit(ctx, in)
			require.NoError(t, err)
		}
		// As if the charges came before the counters: the next charge makes it from them.
		require.NoError(t, l.DB().Exec("DELETE FROM budget_counters").Error)
		in := newOp(c, "k-3")
		in.Policy = &models.PolicyDecision{Decision: models.PolicyAllow, Budgets: []models.BudgetUse{{
			Name: "per-agent", Scope: "agent-1", Amount: 100, Limit: 1000, Since: time.Now().Add(-time.Hour), Over: models.PolicyDeny}}}
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		assert.Equal(t, int64(300), s.Op.Policy.Budgets[0].Used)
		drifts, err := l.BudgetDrifts(ctx)
		require.NoError(t, err)
		assert.Empty(t, drifts)
	})
}

// A ledger whose charges were recorded before the counters (schema 28) gets, when step 29
// migrates it, counters that hold exactly what those charges count, on both engines; the next
// charge is decided against them.
func TestBudgetCountersMigratedFromCharges(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		l, c := setup(t, d)
		charge := func(key string) *models.Operation {
			t.Helper()
			in := newOp(c, key)
			in.Policy = &models.PolicyDecision{Decision: models.PolicyAllow, Budgets: []models.BudgetUse{{
				Name: "per-agent", Scope: "agent-1", Amount: 100, Limit: 1000, Since: time.Now().Add(-time.Hour), Over: models.PolicyDeny}}}
			s, err := l.Submit(ctx, in)
			require.NoError(t, err)
			return s.Op
		}
		for i := range 3 {
			charge(fmt.Sprintf("k-%d", i))
		}
		failed := charge("k-failed")
		require.NoError(t, l.DB().Exec("UPDATE operations SET state = 'FAILED_FINAL' WHERE id = ?", failed.ID).Error)

		// Back to schema 28: no counters, no triggers.
		undo := []string{"DROP TRIGGER operations_budget_recount", "DROP TRIGGER budget_charges_count", "DROP TABLE budget_counters"}
		if d == models.Postgres {
			undo = []string{"DROP TRIGGER operations_budget_recount ON operations", "DROP TRIGGER budget_charges_count ON budget_charges",
				"DROP TABLE budget_counters", "DROP FUNCTION operations_budget_recount(), budget_charges_count()"}
		}
		for _, stmt := range append(undo, "DELETE FROM schema_migrations WHERE version = 29") {
			require.NoError(t, l.DB().Exec(stmt).Error, stmt)
		}
		require.NoError(t, models.Migrate(ctx, l.DB(), d))

		var used int64
		require.NoError(t, l.DB().Raw("SELECT used FROM budget_counters WHERE budget = 'per-agent' AND scope = 'agent-1'").Scan(&used).Error)
		assert.Equal(t, int64(300), used, "the three counted charges; the failed one gives nothing")
		assert.Equal(t, int64(300), charge("k-3").Policy.Budgets[0].Used)
		drifts, err := l.BudgetDrifts(ctx)
		require.NoError(t, err)
		assert.Empty(t, drifts)
	})
}

// A batch whose window starts before the one this replica last saw (a replica whose clock is
// behind, or a member stamped earlier) is decided on the exact count, which the earlier window
// makes larger: never on the remembered one, which would let it pass the limit.
func TestBudgetWindowMovedBackIsDecidedOnTheExactCount(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		t0 := time.Now().UTC().Truncate(time.Second)
		clk := &handClock{t: t0}
		l := models.New(models.Config{DB: testdb.Open(t, d), Dialect: d, Now: clk.Now})
		c := agentOf(ctx, t, l)
		submit := func(key string, since time.Time) *models.Operation {
			t.Helper()
			in := newOp(c, key)
			in.Claim = &models.ClaimSpec{Worker: "w", LeaseFor: time.Minute}
			in.Policy = &models.PolicyDecision{Decision: models.PolicyAllow, Budgets: []models.BudgetUse{{
				Name: "per-agent", Scope: "agent-1", Amount: 100, Limit: 250, Since: since, Over: models.PolicyRequireApproval}}}
			s, err := l.Submit(ctx, in)
			require.NoError(t, err)
			return s.Op
		}
		submit("x1", t0.Add(-time.Hour))
		clk.Advance(2 * time.Hour)
		x2 := submit("x2", clk.Now().Add(-time.Hour))
		assert.Equal(t, int64(0), x2.Policy.Budgets[0].Used, "x1 left the window")
		x3 := submit("x3", t0.Add(-30*time.Minute))
		assert.Equal(t, int64(200), x3.Policy.Budgets[0].Used, "the window moved back over x1: x1 and x2")
		assert.Equal(t, models.StateAwaitingApproval, x3.State, "200 + 100 passes 250")
		drifts, err := l.BudgetDrifts(ctx)
		require.NoError(t, err)
		assert.Empty(t, drifts)
	})
}
