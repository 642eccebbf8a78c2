package models

import (
	"cmp"
	"context"
	"slices"
)

// Evidence is, in brief, what an operation's attempts and look-ups saw: what a list shows of
// it beside its state ("3 attempts · timeout", "14 look-ups, all HTTP 500"), read for a whole
// page at once.
type Evidence struct {
	Attempts int
	// LastClass, LastStatus and LastError are the outcome of the last finished attempt; all nil
	// before one finished.
	LastClass  *string
	LastStatus *int
	LastError  *string
	// Lookups count the finished look-ups (reconcile probes) by their answer, the most
	// frequent first.
	Lookups []LookupCount `gorm:"-"`
}

// LookupCount is how many look-ups got one answer: the probe's outcome and the downstream's
// status ("" without one).
type LookupCount struct {
	Outcome string
	Status  string
	N       int
}

// lastAttemptJoin joins an operation's last finished attempt, as last_attempt (none before one
// finished), so that a list reads what it saw in the list's own query.
const lastAttemptJoin = "LEFT JOIN attempts last_attempt ON last_attempt.operation_id = operations.id AND last_attempt.number = " +
	"(SELECT MAX(a.number) FROM attempts a WHERE a.operation_id = operations.id AND a.finished_at IS NOT NULL)"

// evidenceColumns are Evidence's columns, read through lastAttemptJoin.
const evidenceColumns = "operations.attempts, last_attempt.class AS last_class, " +
	"last_attempt.downstream_status AS last_status, last_attempt.error AS last_error"

// Evidence returns what the attempts and look-ups of the operations ids within s saw, by id:
// two statements per 500 operations, whatever they hold.
func (l *Ledger) Evidence(ctx context.Context, s Scope, ids []string) (map[string]Evidence, error) {
	out := make(map[string]Evidence, len(ids))
	for chunk := range slices.Chunk(ids, 500) {
		var rows []struct {
			ID string
			Evidence
		}
		q := s.apply(l.scope(ctx).Table("operations"), "operations.tenant").
			Select("operations.id, "+evidenceColumns).Joins(lastAttemptJoin).Where("operations.id IN ?", chunk)
		if err := q.Scan(&rows).Error; err != nil {
			return nil, unavailable("read evidence", err)
		}
		for _, r := range rows {
			out[r.ID] = r.Evidence
		}
	}
	lookups, err := l.lookupCounts(ctx, s, ids)
	if err != nil {
		return nil, err
	}
	for id, n := range lookups {
		if ev, ok := out[id]; ok {
			ev.Lookups = n
			out[id] = ev
		}
	}
	return out, nil
}

// lookupCounts counts the finished look-ups of the operations ids within s by answer, in the
// database: an operation UNKNOWN for days has thousands, and a page wants only their tally.
func (l *Ledger) lookupCounts(ctx context.Context, s Scope, ids []string) (map[string][]LookupCount, error) {
	outcome, status := "json_extract(detail, '$.outcome')", "CAST(json_extract(detail, '$.downstream_status') AS TEXT)"
	if l.dialect == Postgres {
		outcome, status = "(CAST(detail AS JSON) ->> 'outcome')", "(CAST(detail AS JSON) ->> 'downstream_status')"
	}
	out := make(map[string][]LookupCount)
	for chunk := range slices.Chunk(ids, 500) {
		var rows []struct {
			OperationID string
			LookupCount
		}
		q := s.apply(l.scope(ctx).Table("events"), "tenant").
			Select("operation_id, COALESCE("+outcome+", '') AS outcome, COALESCE("+status+", '') AS status, COUNT(*) AS n").
			Where("operation_id IN ? AND type = ?", chunk, EventReconcileFinished).Group("1, 2, 3")
		if err := q.Scan(&rows).Error; err != nil {
			return nil, unavailable("count look-ups", err)
		}
		for _, r := range rows {
			out[r.OperationID] = append(out[r.OperationID], r.LookupCount)
		}
	}
	for _, counts := range out {
		slices.SortFunc(counts, func(a, b LookupCount) int {
			return cmp.Or(b.N-a.N, cmp.Compare(a.Outcome, b.Outcome), cmp.Compare(a.Status, b.Status))
		})
	}
	return out, nil
}
