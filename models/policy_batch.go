package models

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
)

// Group commit of new operations with budgets (PostgreSQL). A new operation that a policy
// allows and whose budgets are to be charged is recorded with the requests of its kind in flight
// beside it: each member is decided in turn against the counters of its scope values and the
// members before it in the batch, and the members every budget allows are written by one
// statement (operation, attempt, events, policy decision and charges). What a budget guarantees
// does not change: each charge is decided against every charge of its scope value committed
// before it (budget_counters.go). The batch reads the counters in one of two ways:
//
//   - checked (one round trip, the usual case): from what this process last saw committed of
//     them (counterCache), and the statement writes only if every counter still holds exactly
//     that (and the tenant's limit is the one read): it moves each counter's window in the same
//     statement, under the row lock its UPDATE takes, and fails as a whole (nothing written)
//     when any counter changed meanwhile: another replica charged it, an operation failed or
//     was approved. A batch whose windows start where the cached ones do is decided on exactly
//     the count its members' windows hold; one whose window moved (once a step, a minute of a
//     day's window) runs locked;
//   - locked (a transaction, four round trips): when a counter is not known to this process or
//     the checked statement failed, the counters are locked in counterKey order, moved and read
//     (lockCounters), the members decided and written, and the transaction commits.
//
// A member that a budget would hold or deny is not written by the batch: Submit's own
// transaction decides it again, alone, and writes its review or its refusal (rare by design:
// it is the budget's limit being reached). A member whose key turns out to be taken inserts
// nothing and reads the operation that holds the key, as a lone claim would; its amount was
// counted for the members after it in the batch, which can only make them stricter.

// policyClaim is one new operation with a policy decision, claimed by its first attempt.
type policyClaim struct {
	claim  claimRequest // op, attempt, created and attempt_started events
	policy *PolicyDecision
	actor  string
}

// policyAnswer says whether the member's operation was recorded; alone when a budget holds or
// denies it (or the batch wrote nothing): Submit's transaction decides it. err is set when the
// batch's commit was cut off.
type policyAnswer struct {
	created, alone bool
	err            error
}

// counterCache is what this process last saw committed of each budget counter it charged: the
// checked batch's expectation. It is only ever a guess: a wrong one costs a failed statement
// and a locked batch, never a wrong count.
type counterCache struct {
	mu sync.Mutex
	m  map[counterKey]cachedCounter
}

type cachedCounter struct {
	used   int64
	window time.Time
	limit  *int64
}

// counterCacheMax bounds the cache: past it, it starts again empty (scope values are as many
// as principals times currencies, say; a busy one is back after one locked batch).
const counterCacheMax = 10_000

// get returns the cached counters of keys, and whether every one is known.
func (c *counterCache) get(keys []counterKey) (map[counterKey]cachedCounter, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[counterKey]cachedCounter, len(keys))
	for _, k := range keys {
		v, ok := c.m[k]
		if !ok {
			return nil, false
		}
		out[k] = v
	}
	return out, true
}

func (c *counterCache) put(k counterKey, v cachedCounter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= counterCacheMax {
		c.m = make(map[counterKey]cachedCounter)
	}
	c.m[k] = v
}

func (c *counterCache) forget(keys []counterKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		delete(c.m, k)
	}
}

// policyBatch records reqs as the comment above says.
func (l *Ledger) policyBatch(ctx context.Context, reqs []policyClaim, out []policyAnswer) {
	ctx, cancel := context.WithTimeout(ctx, l.batchTimeout())
	defer cancel()
	var w counterWindows
	for _, r := range reqs {
		for i := range r.policy.Budgets {
			w.add(r.claim.op.Tenant, &r.policy.Budgets[i])
		}
	}
	keys := w.sorted()
	if cached, ok := l.batch.counters.get(keys); ok && sameWindows(&w, cached) && l.checkedBatch(ctx, reqs, out, &w, cached) {
		return
	}
	clear(out)
	l.lockedBatch(ctx, reqs, out, &w)
}

// sameWindows reports whether every window of w starts where the cached one does: the cached
// count is then the count of the window each member is decided in. A window that moves (once a
// step of its budget's window, rules.WindowStep) is moved and read locked, so that what a member
// records as used is exact.
func sameWindows(w *counterWindows, cached map[counterKey]cachedCounter) bool {
	for k, since := range w.since {
		if !since.Equal(cached[k].window) {
			return false
		}
	}
	return true
}

// decideMembers decides each member of reqs in turn against counters and the members before it,
// marks those a budget holds or denies to go alone, and returns the others.
func decideMembers(reqs []policyClaim, out []policyAnswer, counters map[counterKey]counter) []int {
	var written []int
	running := map[counterKey]int64{}
	for i, r := range reqs {
		tenant := r.claim.op.Tenant
		if decideBudgets(tenant, r.policy, counters, running) != PolicyAllow {
			out[i].alone = true
			continue
		}
		for _, b := range r.policy.Budgets {
			running[counterKey{tenant, b.Name, b.Scope}] += b.Amount
		}
		written = append(written, i)
	}
	return written
}

// charged is what the members at written that the statement inserted add to each counter.
func charged(reqs []policyClaim, written []int, inserted map[string]bool) map[counterKey]int64 {
	out := map[counterKey]int64{}
	for _, i := range written {
		if op := reqs[i].claim.op; inserted[op.ID] {
			for _, b := range reqs[i].policy.Budgets {
				out[counterKey{op.Tenant, b.Name, b.Scope}] += b.Amount
			}
		}
	}
	return out
}

// checkedBatch runs the batch against the cached counters (the checked way above). It returns
// false, having written nothing, when a counter changed or the server refused the statement:
// the batch is then run locked.
func (l *Ledger) checkedBatch(ctx context.Context, reqs []policyClaim, out []policyAnswer, w *counterWindows, cached map[counterKey]cachedCounter) bool {
	counters := make(map[counterKey]counter, len(cached))
	for k, c := range cached {
		counters[k] = counter{used: c.used, limit: c.limit}
	}
	written := decideMembers(reqs, out, counters)
	if len(written) < len(reqs) {
		// A member goes alone: its own transaction decides it on the count as it is, which
		// may be below the cached one (an operation that failed since gave its amount back).
		// The next batch reads the counters locked and caches them again.
		l.batch.counters.forget(w.keys)
	}
	if len(written) == 0 {
		return true // every member goes alone
	}
	var check *counterCheck
	if len(w.keys) > 0 { // rules only, no budget: nothing to check
		check = &counterCheck{keys: w.keys, cached: cached, since: w.since}
	}
	s, err := policyStatement(reqs, written, check)
	if err != nil {
		return false
	}
	res, err := l.runPolicyStatement(ctx, l.db.Statement.ConnPool, s)
	if err != nil {
		l.batch.counters.forget(w.keys)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return false // nothing written: a counter changed (22012), or a refusal
		}
		for _, i := range written {
			out[i] = policyAnswer{err: err} // the statement may have committed
		}
		return true
	}
	added := charged(reqs, written, res.inserted)
	for _, k := range w.keys {
		l.batch.counters.put(k, cachedCounter{used: res.moved[k] + added[k], window: w.since[k], limit: cached[k].limit})
	}
	for _, i := range written {
		out[i] = policyAnswer{created: res.inserted[reqs[i].claim.op.ID]}
	}
	return true
}

// lockedBatch runs the batch in a transaction that locks the counters first (the locked way
// above), and leaves in the cache what it committed.
func (l *Ledger) lockedBatch(ctx context.Context, reqs []policyClaim, out []policyAnswer, w *counterWindows) {
	committing := false
	var res policyResult
	var written []int
	var counters map[counterKey]counter
	err := l.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if counters, err = l.lockCounters(tx, w); err != nil {
			return err
		}
		if written = decideMembers(reqs, out, counters); len(written) == 0 {
			return nil
		}
		s, err := policyStatement(reqs, written, nil)
		if err != nil {
			return err
		}
		if res, err = l.runPolicyStatement(ctx, tx.Statement.ConnPool, s); err != nil {
			return err
		}
		committing = true // what fails from here is the COMMIT
		return nil
	})
	switch {
	case err != nil && !committing:
		// Rolled back before the commit was sent: nothing of the batch was written, and each
		// member goes again alone.
		l.batch.counters.forget(w.keys)
		for i := range reqs {
			out[i] = policyAnswer{alone: true}
		}
	case err != nil:
		l.batch.counters.forget(w.keys)
		err = batchError(err)
		var refused *refusedBatch
		for i := range reqs {
			out[i] = policyAnswer{alone: errors.As(err, &refused), err: err}
		}
	default:
		added := charged(reqs, written, res.inserted)
		for _, k := range w.keys {
			l.batch.counters.put(k, cachedCounter{used: counters[k].used + added[k], window: w.since[k], limit: counters[k].limit})
		}
		for _, i := range written {
			out[i] = policyAnswer{created: res.inserted[reqs[i].claim.op.ID]}
		}
	}
}

// counterCheck is what a checked batch's statement expects of each counter: the cached usage,
// window and limit; it moves each window to since.
type counterCheck struct {
	keys   []counterKey
	cached map[counterKey]cachedCounter
	since  map[counterKey]time.Time
}

// policyResult is what a batch's statement answers: the operations it inserted and, for a
// checked batch, each counter's usage once its window moved (before the batch's charges).
type policyResult struct {
	inserted map[string]bool
	moved    map[counterKey]int64
}

// runPolicyStatement runs a batch's statement on q and reads its answer, to the last row: a
// checked statement whose counters changed fails only as its last row is computed.
func (l *Ledger) runPolicyStatement(ctx context.Context, q gorm.ConnPool, s *statement) (policyResult, error) {
	res := policyResult{inserted: map[string]bool{}, moved: map[counterKey]int64{}}
	rows, err := q.QueryContext(ctx, s.String(), s.args...)
	if err != nil {
		return res, err
	}
	defer rows.Close()
	for rows.Next() {
		var kind, id, budget, scope string
		var used int64
		if err := rows.Scan(&kind, &id, &budget, &scope, &used); err != nil {
			return res, err
		}
		switch kind {
		case "o":
			res.inserted[id] = true
		case "k":
			res.moved[counterKey{id, budget, scope}] = used
		}
	}
	if err := rows.Err(); err != nil {
		return res, err
	}
	return res, rows.Close()
}

// policyStatement writes the members of reqs at written in one statement: each operation unless
// its key is taken, and, for each operation it inserted, its attempt, its events (created,
// policy_decided, attempt_started, in that order on its timeline), its policy decision and its
// charges. Rows go in the order of their keys, as claimBatch's do. With check, the statement
// first moves and checks the counters (counterCheck) and fails, writing nothing, unless every
// one holds what check expects. It answers rows (kind, id or tenant, budget, scope, used): 'o'
// for each operation inserted, 'k' for each counter checked, with its usage once moved.
func policyStatement(reqs []policyClaim, written []int, check *counterCheck) (*statement, error) {
	order := slices.Clone(written)
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(reqs[a].claim.op.Tenant, reqs[b].claim.op.Tenant), cmp.Compare(reqs[a].claim.op.Key, reqs[b].claim.op.Key))
	})
	decisions := make(map[int][]byte, len(order))
	events := make(map[int][3]Event, len(order))
	for _, i := range order {
		r := reqs[i]
		b, err := json.Marshal(r.policy)
		if err != nil {
			return nil, err
		}
		decided, err := newEvent(r.claim.op.CreatedAt, eventInput{op: r.claim.op, typ: EventPolicyDecided, actor: r.actor, rawDetail: b})
		if err != nil {
			return nil, err
		}
		decisions[i], events[i] = b, [3]Event{r.claim.events[0], decided, r.claim.events[1]}
	}

	s := newStatement(len(order) * 100)
	s.WriteString("WITH ")
	if check != nil {
		check.write(s)
	}
	s.WriteString("op AS (INSERT INTO operations (" + operationColumns + ") VALUES ")
	for n, i := range order {
		if n > 0 {
			s.WriteString(", ")
		}
		s.row(reqs[i].claim.op.columns()...)
	}
	s.WriteString(" ON CONFLICT (tenant, op_key) DO NOTHING RETURNING id), " +
		"at AS (INSERT INTO attempts (id, operation_id, number, fence, worker, started_at) " +
		"SELECT v.id, v.operation_id, v.number, v.fence, v.worker, v.started_at FROM (VALUES ")
	for n, i := range order {
		if n > 0 {
			s.WriteString(", ")
		}
		a := reqs[i].claim.attempt
		s.typedRow([]string{"text", "text", "integer", "bigint", "text", "timestamptz"},
			a.ID, a.OperationID, a.Number, a.Fence, a.Worker, a.StartedAt)
	}
	s.WriteString(") AS v (id, operation_id, number, fence, worker, started_at) JOIN op ON op.id = v.operation_id), " +
		"ev AS (INSERT INTO events (operation_id, tenant, at, type, from_state, to_state, attempt, actor, detail) " +
		"SELECT v.operation_id, v.tenant, v.at, v.type, v.from_state, v.to_state, v.attempt, v.actor, v.detail FROM (VALUES ")
	s.eventRows(func(yield func(Event) bool) {
		for _, i := range order {
			for _, e := range events[i] {
				if !yield(e) {
					return
				}
			}
		}
	})
	s.WriteString(") AS v (n, operation_id, tenant, at, type, from_state, to_state, attempt, actor, detail) " +
		"JOIN op ON op.id = v.operation_id ORDER BY v.n), " +
		"pol AS (INSERT INTO operation_policies (operation_id, tenant, decision, created_at) " +
		"SELECT v.operation_id, v.tenant, v.decision, v.created_at FROM (VALUES ")
	for n, i := range order {
		if n > 0 {
			s.WriteString(", ")
		}
		op := reqs[i].claim.op
		s.typedRow([]string{"text", "text", "text", "timestamptz"}, op.ID, op.Tenant, string(decisions[i]), op.CreatedAt)
	}
	s.WriteString(") AS v (operation_id, tenant, decision, created_at) JOIN op ON op.id = v.operation_id)")
	charges := 0
	for _, i := range order {
		charges += len(reqs[i].policy.Budgets)
	}
	if charges > 0 {
		// Each charge counts itself in its counter as it is inserted (budget_charges_count).
		s.WriteString(", ch AS (INSERT INTO budget_charges (operation_id, tenant, budget, scope, amount, created_at) " +
			"SELECT v.operation_id, v.tenant, v.budget, v.scope, v.amount, v.created_at FROM (VALUES ")
		n := 0
		for _, i := range order {
			op := reqs[i].claim.op
			for _, b := range reqs[i].policy.Budgets {
				if n > 0 {
					s.WriteString(", ")
				}
				s.typedRow([]string{"text", "text", "text", "text", "bigint", "timestamptz"}, op.ID, op.Tenant, b.Name, b.Scope, b.Amount, op.CreatedAt)
				n++
			}
		}
		s.WriteString(") AS v (operation_id, tenant, budget, scope, amount, created_at) JOIN op ON op.id = v.operation_id)")
	}
	s.WriteString(" SELECT 'o', id, '', '', 0::bigint FROM op")
	if check != nil {
		// The last branch reads chk, which fails unless every counter was found as expected.
		s.WriteString(" UNION ALL SELECT 'k', tenant, budget, scope, used FROM k UNION ALL SELECT 'c', '', '', '', ok FROM chk")
	}
	return s, nil
}

// write writes the check's common table expressions: v, the counters as expected; k, the
// counters found so, each locked by its UPDATE, its window moved (the counted charges between
// the old start and the new leave the count, or join it when the window moved back); chk, 1
// when k holds every counter, and a division by zero (SQLSTATE 22012), which fails the whole
// statement, when one was not found as expected. The charges of the window's move are read
// under the row's lock: a change of an operation's state they depend on either committed before
// (and changed the counter, which then fails the check) or waits for this statement, and then
// finds the window moved past the charges it would give back.
func (c *counterCheck) write(s *statement) {
	s.WriteString("v (tenant, budget, scope, used, window_from, since, lim) AS (VALUES ")
	for n, k := range c.keys {
		if n > 0 {
			s.WriteString(", ")
		}
		cc := c.cached[k]
		s.typedRow([]string{"text", "text", "text", "bigint", "timestamptz", "timestamptz", "bigint"},
			k.tenant, k.budget, k.scope, cc.used, cc.window, c.since[k], cc.limit)
	}
	s.WriteString("), k AS (UPDATE budget_counters k SET window_from = v.since, used = k.used - COALESCE((" +
		"SELECT SUM(CASE WHEN ch.created_at < v.since THEN ch.amount ELSE -ch.amount END) FROM budget_charges ch " +
		"JOIN operations o ON o.id = ch.operation_id WHERE ch.tenant = k.tenant AND ch.budget = k.budget AND ch.scope = k.scope " +
		"AND ch.created_at >= LEAST(k.window_from, v.since) AND ch.created_at < GREATEST(k.window_from, v.since) " +
		"AND o.state IN " + countingList + "), 0) FROM v WHERE k.tenant = v.tenant AND k.budget = v.budget AND k.scope = v.scope " +
		"AND k.used = v.used AND k.window_from = v.window_from AND (SELECT bl.limit_amount FROM budget_limits bl " +
		"WHERE bl.tenant = v.tenant AND bl.budget = v.budget) IS NOT DISTINCT FROM v.lim RETURNING k.tenant, k.budget, k.scope, k.used), " +
		"chk AS (SELECT 1 / (CASE WHEN count(*) = ")
	s.param(int64(len(c.keys)), "bigint")
	s.WriteString(" THEN 1 ELSE 0 END) AS ok FROM k), ")
}
