package models

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Budget counters (docs/POLICY.md, "Why a budget holds"). A budget's usage of one scope value
// is kept in one row of budget_counters: used is the sum of the amounts charged to that scope
// value since window_from by operations in a counting state. Charging locks the row, moves its
// window to the charge's, reads used and adds to it, in the transaction that records the
// operation: O(1) work per charge however many operations the window holds, where a sum over
// the window's charges grew with them (issue 49 measured 0.085x on one scope value).
//
// The counter cannot drift from the ledger, because the database keeps it, in the same
// transaction as every change it follows, whichever code path or release makes the change:
//
//   - a charge inserted for an operation in a counting state adds its amount (trigger
//     budget_charges_count), when the charge is inside the counter's window;
//   - an operation whose state enters or leaves the counting states (PENDING, RUNNING,
//     UNKNOWN, SUCCEEDED) adds or gives back its charges' amounts (trigger
//     operations_budget_recount): an approval (AWAITING_APPROVAL to PENDING) counts, an end in
//     FAILED_FINAL gives back, whether a lone transaction, a group-commit batch or a release that
//     knows nothing of budgets wrote it;
//   - moving the window (moveWindows) subtracts the counted charges that left it, or adds back
//     those a window moved backwards covers again (a replica whose clock is behind), each
//     summed from the charges under the row's lock.
//
// Each of these runs under the counter row's lock (FOR UPDATE; SQLite has one writer), so
// used is, at every commit, exactly the sum over the charges it describes: budgetDrift
// recomputes it, and the concurrency tests compare the two after every run.
//
// A window's start moves in steps (a 1,440th of a rolling window, at least a second: the
// budget's Since, jobs/catalog/rules.WindowStep; windowStart keeps whole seconds): a rolling
// window may count a charge up to a step older than its length, never one fewer, and the
// window moves at most once a step per scope value, not once per charge.

// countingList is countingStates written out for the triggers' SQL.
const countingList = "('PENDING', 'RUNNING', 'UNKNOWN', 'SUCCEEDED')"

// budgetCountersSchema is migration step 29's SQL shared by both engines: the counters, filled
// from the charges already recorded (each from its scope's oldest charge, so nothing is left
// out; the first charge moves the window to where it belongs).
const budgetCountersSchema = `
CREATE TABLE budget_counters (
	tenant      TEXT NOT NULL,
	budget      TEXT NOT NULL,
	scope       TEXT NOT NULL,
	used        BIGINT NOT NULL,
	window_from {{ts}} NOT NULL,
	PRIMARY KEY (tenant, budget, scope)
);
INSERT INTO budget_counters (tenant, budget, scope, used, window_from)
SELECT c.tenant, c.budget, c.scope, SUM(CASE WHEN o.state IN ` + countingList + ` THEN c.amount ELSE 0 END), MIN(c.created_at)
FROM budget_charges c JOIN operations o ON o.id = c.operation_id GROUP BY c.tenant, c.budget, c.scope;
`

// budgetCounterTriggers are step 29's triggers, in each engine's language: one statement each
// (their bodies hold semicolons, so they are not split).
func budgetCounterTriggers(d Dialect) []string {
	if d == Postgres {
		// SET search_path FROM CURRENT: the functions find the ledger's tables in the schema
		// they were made in, whatever a pooled session's path is.
		return []string{`
CREATE FUNCTION budget_charges_count() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	UPDATE budget_counters k SET used = k.used + NEW.amount
	FROM operations o
	WHERE o.id = NEW.operation_id AND o.state IN ` + countingList + `
		AND k.tenant = NEW.tenant AND k.budget = NEW.budget AND k.scope = NEW.scope AND NEW.created_at >= k.window_from;
	RETURN NULL;
END
$$`, `
CREATE TRIGGER budget_charges_count AFTER INSERT ON budget_charges
FOR EACH ROW EXECUTE FUNCTION budget_charges_count()`, `
CREATE FUNCTION operations_budget_recount() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	UPDATE budget_counters k SET used = k.used + CASE WHEN NEW.state IN ` + countingList + ` THEN c.amount ELSE -c.amount END
	FROM budget_charges c
	WHERE c.operation_id = NEW.id AND k.tenant = c.tenant AND k.budget = c.budget AND k.scope = c.scope
		AND c.created_at >= k.window_from;
	RETURN NULL;
END
$$`, `
CREATE TRIGGER operations_budget_recount AFTER UPDATE OF state ON operations FOR EACH ROW
WHEN ((OLD.state IN ` + countingList + `) IS DISTINCT FROM (NEW.state IN ` + countingList + `))
EXECUTE FUNCTION operations_budget_recount()`}
	}
	return []string{`
CREATE TRIGGER budget_charges_count AFTER INSERT ON budget_charges
WHEN (SELECT state FROM operations WHERE id = NEW.operation_id) IN ` + countingList + `
BEGIN
	UPDATE budget_counters SET used = used + NEW.amount
	WHERE tenant = NEW.tenant AND budget = NEW.budget AND scope = NEW.scope AND NEW.created_at >= window_from;
END`, `
CREATE TRIGGER operations_budget_recount AFTER UPDATE OF state ON operations
WHEN (OLD.state IN ` + countingList + `) <> (NEW.state IN ` + countingList + `)
BEGIN
	UPDATE budget_counters SET used = used + COALESCE((SELECT CASE WHEN NEW.state IN ` + countingList + ` THEN c.amount ELSE -c.amount END
		FROM budget_charges c WHERE c.operation_id = NEW.id AND c.tenant = budget_counters.tenant
		AND c.budget = budget_counters.budget AND c.scope = budget_counters.scope AND c.created_at >= budget_counters.window_from), 0)
	WHERE (tenant, budget, scope) IN (SELECT tenant, budget, scope FROM budget_charges WHERE operation_id = NEW.id);
END`}
}

// counterKey names one budget counter: a budget's scope value in a tenant.
type counterKey struct{ tenant, budget, scope string }

func (k counterKey) compare(o counterKey) int {
	return cmp.Or(cmp.Compare(k.tenant, o.tenant), cmp.Compare(k.budget, o.budget), cmp.Compare(k.scope, o.scope))
}

// counter is a locked counter as charging reads it: what is counted in its window, and the
// tenant's own limit of the budget when an admin set one.
type counter struct {
	used  int64
	limit *int64
}

// windowStart is where a counter's window begins for a charge whose budget's window began at
// since: the whole second at or before it.
func windowStart(since time.Time) time.Time { return since.UTC().Truncate(time.Second) }

// counterWindows are the counters a set of charges needs, each with the earliest window any of
// them asks for (the charges of one batch were stamped milliseconds apart: the earliest window
// counts the most, never too little), in the one order every writer locks them in.
type counterWindows struct {
	keys  []counterKey
	since map[counterKey]time.Time
}

func (w *counterWindows) add(tenant string, b *BudgetUse) {
	if w.since == nil {
		w.since = map[counterKey]time.Time{}
	}
	k, s := counterKey{tenant, b.Name, b.Scope}, windowStart(b.Since)
	if prev, ok := w.since[k]; !ok {
		w.keys, w.since[k] = append(w.keys, k), s
	} else if s.Before(prev) {
		w.since[k] = s
	}
}

func (w *counterWindows) sorted() []counterKey {
	slices.SortFunc(w.keys, counterKey.compare)
	return w.keys
}

// lockCounters locks the counters of w in their order, makes those that do not exist yet (from
// the charges already in their windows), moves each window to where w asks, and returns each
// counter with its tenant's limit. On SQLite its first statement writes, so the transaction
// holds the database's write lock before it reads a counter.
func (l *Ledger) lockCounters(tx *gorm.DB, w *counterWindows) (map[counterKey]counter, error) {
	keys := w.sorted()
	if len(keys) == 0 {
		return nil, nil
	}
	if l.dialect != Postgres {
		if err := l.createCounters(tx, keys, w.since); err != nil {
			return nil, err
		}
	}
	found, window, err := l.readCounters(tx, keys)
	if err != nil {
		return nil, err
	}
	if len(found) < len(keys) { // PostgreSQL: make the missing ones, then lock them
		var missing []counterKey
		for _, k := range keys {
			if _, ok := found[k]; !ok {
				missing = append(missing, k)
			}
		}
		if err := l.createCounters(tx, missing, w.since); err != nil {
			return nil, err
		}
		more, moreWindow, err := l.readCounters(tx, missing)
		if err != nil {
			return nil, err
		}
		for k, c := range more {
			found[k], window[k] = c, moreWindow[k]
		}
	}
	var moves []counterKey
	for _, k := range keys {
		c, ok := found[k]
		if !ok {
			return nil, fmt.Errorf("budget %s: counter of %q not found after it was made", k.budget, k.scope)
		}
		if !window[k].Equal(w.since[k]) {
			moves = append(moves, k)
		}
		found[k] = c
	}
	if len(moves) > 0 {
		moved, err := l.moveWindows(tx, moves, w.since)
		if err != nil {
			return nil, err
		}
		for k, used := range moved {
			c := found[k]
			c.used = used
			found[k] = c
		}
	}
	return found, nil
}

// keyList writes keys as a list of (tenant, budget, scope) rows for IN, with their arguments.
func keyList(keys []counterKey) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 3*len(keys))
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?)")
		args = append(args, k.tenant, k.budget, k.scope)
	}
	return b.String(), args
}

// readCounters reads and locks the counters of keys that exist, in keys' order, with their
// tenants' limits.
func (l *Ledger) readCounters(tx *gorm.DB, keys []counterKey) (map[counterKey]counter, map[counterKey]time.Time, error) {
	list, args := keyList(keys)
	q := "SELECT k.tenant, k.budget, k.scope, k.used, k.window_from, bl.limit_amount FROM budget_counters k " +
		"LEFT JOIN budget_limits bl ON bl.tenant = k.tenant AND bl.budget = k.budget " +
		"WHERE (k.tenant, k.budget, k.scope) IN (VALUES " + list + ") ORDER BY k.tenant, k.budget, k.scope"
	if l.dialect == Postgres {
		q += " FOR UPDATE OF k"
	}
	var rows []struct {
		Tenant, Budget, Scope string
		Used                  int64
		WindowFrom            time.Time
		LimitAmount           *int64
	}
	if err := tx.Raw(q, args...).Scan(&rows).Error; err != nil {
		return nil, nil, fmt.Errorf("lock budget counters: %w", err)
	}
	found := make(map[counterKey]counter, len(rows))
	window := make(map[counterKey]time.Time, len(rows))
	for _, r := range rows {
		k := counterKey{r.Tenant, r.Budget, r.Scope}
		found[k], window[k] = counter{used: r.Used, limit: r.LimitAmount}, r.WindowFrom
	}
	return found, window, nil
}

// createCounters makes the counters of keys that do not exist, each from the counted charges
// already in its window (a scope value's first charge in a while, or a counter of charges an
// earlier release recorded). Two transactions making one counter: the second waits for the
// first's commit and makes nothing.
func (l *Ledger) createCounters(tx *gorm.DB, keys []counterKey, since map[counterKey]time.Time) error {
	// A parameter in a SELECT list is text to PostgreSQL unless cast.
	ts := "?"
	if l.dialect == Postgres {
		ts = "CAST(? AS TIMESTAMPTZ)"
	}
	for _, k := range keys {
		err := tx.Exec("INSERT INTO budget_counters (tenant, budget, scope, used, window_from) "+
			"SELECT ?, ?, ?, COALESCE((SELECT SUM(c.amount) FROM budget_charges c JOIN operations o ON o.id = c.operation_id "+
			"WHERE c.tenant = ? AND c.budget = ? AND c.scope = ? AND c.created_at >= ? AND o.state IN "+countingList+"), 0), "+ts+" "+
			"WHERE NOT EXISTS (SELECT 1 FROM budget_counters WHERE tenant = ? AND budget = ? AND scope = ?) ON CONFLICT DO NOTHING",
			k.tenant, k.budget, k.scope, k.tenant, k.budget, k.scope, since[k], since[k], k.tenant, k.budget, k.scope).Error
		if err != nil {
			return fmt.Errorf("budget %s: make counter: %w", k.budget, err)
		}
	}
	return nil
}

// moveWindows moves the windows of keys' counters (locked) to since: the counted charges
// between the old start and the new leave the count when the window moves forward and join it
// when it moves back. It returns each counter's new usage. The charges are read by this
// statement, after the lock: a concurrent change they depend on has committed or waits.
func (l *Ledger) moveWindows(tx *gorm.DB, keys []counterKey, since map[counterKey]time.Time) (map[counterKey]int64, error) {
	least, greatest := "LEAST", "GREATEST"
	if l.dialect != Postgres {
		least, greatest = "MIN", "MAX"
	}
	out := make(map[counterKey]int64, len(keys))
	for _, k := range keys {
		s := since[k]
		var used []int64
		err := tx.Raw("UPDATE budget_counters SET used = used - COALESCE((SELECT SUM(CASE WHEN c.created_at < ? THEN c.amount ELSE -c.amount END) "+
			"FROM budget_charges c JOIN operations o ON o.id = c.operation_id "+
			"WHERE c.tenant = budget_counters.tenant AND c.budget = budget_counters.budget AND c.scope = budget_counters.scope "+
			"AND c.created_at >= "+least+"(budget_counters.window_from, ?) AND c.created_at < "+greatest+"(budget_counters.window_from, ?) "+
			"AND o.state IN "+countingList+"), 0), window_from = ? "+
			"WHERE tenant = ? AND budget = ? AND scope = ? RETURNING used",
			s, s, s, s, k.tenant, k.budget, k.scope).Scan(&used).Error
		if err != nil {
			return nil, fmt.Errorf("budget %s: move window: %w", k.budget, err)
		}
		if len(used) != 1 {
			return nil, fmt.Errorf("budget %s: move window: counter of %q not found", k.budget, k.scope)
		}
		out[k] = used[0]
	}
	return out, nil
}

// decideBudgets decides each budget of p against the locked counters, the amounts of earlier
// members of the same batch (running) included, and returns the strictest of the rule's
// decision and the budgets'. A tenant's own limit replaces the file's.
func decideBudgets(tenant string, p *PolicyDecision, counters map[counterKey]counter, running map[counterKey]int64) string {
	decision := p.Decision
	for i := range p.Budgets {
		b := &p.Budgets[i]
		k := counterKey{tenant, b.Name, b.Scope}
		c := counters[k]
		if b.fileLimit == nil {
			limit := b.Limit
			b.fileLimit = &limit
		}
		b.Limit = *b.fileLimit
		if c.limit != nil {
			b.Limit = *c.limit
		}
		b.Used, b.Decision = c.used+running[k], PolicyAllow
		if b.Used+b.Amount > b.Limit {
			b.Decision = b.Over
		}
		decision = stricter(decision, b.Decision)
	}
	return decision
}

// BudgetDrift is a counter whose usage differs from the sum of its window's counted charges.
type BudgetDrift struct {
	Tenant, Budget, Scope string
	Counted, Recomputed   int64
}

// BudgetDrifts recomputes every budget counter from the charges and the operations' states and
// lists those that differ (none, unless something wrote around the ledger's rules).
func (l *Ledger) BudgetDrifts(ctx context.Context) ([]BudgetDrift, error) {
	var out []BudgetDrift
	err := l.scope(ctx).Raw("SELECT k.tenant, k.budget, k.scope, k.used AS counted, COALESCE((SELECT SUM(c.amount) FROM budget_charges c " +
		"JOIN operations o ON o.id = c.operation_id WHERE c.tenant = k.tenant AND c.budget = k.budget AND c.scope = k.scope " +
		"AND c.created_at >= k.window_from AND o.state IN " + countingList + "), 0) AS recomputed FROM budget_counters k").Scan(&out).Error
	if err != nil {
		return nil, unavailable("recompute budget counters", err)
	}
	drifts := out[:0]
	for _, d := range out {
		if d.Counted != d.Recomputed {
			drifts = append(drifts, d)
		}
	}
	return drifts, nil
}
