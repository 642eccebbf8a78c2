package models

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/internal/groupcommit"
	"github.com/jackc/pgx/v5/pgconn"
)

// Group commit (docs/PERFORMANCE.md): on PostgreSQL, the two writes every new operation makes,
// its claim and its attempt's outcome, go to the ledger together with the same writes of the
// requests in flight beside it: one statement and one commit for a batch, each request
// answered from its own rows. A batch forms only while earlier ones are still running
// (internal/groupcommit), so an idle gateway writes exactly as before, one request at a time.
//
// What one operation means does not change (docs/model checks it per operation):
//
//   - a claim is decided by the unique key of (tenant, op_key): in a batch, a key already
//     taken, or taken by an earlier row of the same batch, inserts nothing for its own request
//     only, which then reads the row that holds the key, as a lone claim would;
//   - an outcome is written only where its operation is still RUNNING on the attempt's fence
//     and its attempt is still open, both row-locked before anything is written; any other
//     member (stale, or of a tenant with a webhook subscription, whose announcements the batch
//     does not write) is decided again on its own, by the transaction a lone outcome runs;
//   - a batch the server refused (its error is PostgreSQL's) wrote nothing: its members run
//     alone; a batch whose answer was lost may have committed: each member is told so
//     (CodeUnavailable, MaybeRecorded), as a lone statement's caller is.
const (
	// groupCommitSlots is how many batches of each kind run at once: with one, the window a
	// batch forms in is the whole round trip of the one before; more slots, smaller batches.
	// One measured best (docs/PERFORMANCE.md, Group commit): at 16 in flight, 1,988–2,152 new
	// operations/s with one slot, 1,778–1,828 with two (an earlier try: 962–1,220 with four).
	groupCommitSlots = 1
	// groupCommitMax bounds a batch (a claim takes 62 parameters, a statement at most 65,535).
	groupCommitMax = 64
)

// batchers are a PostgreSQL ledger's group commits; nil on SQLite, whose single writer takes
// one transaction at a time anyway.
type batchers struct {
	claims   *groupcommit.Batcher[claimRequest, claimAnswer]
	outcomes *groupcommit.Batcher[*finishing, outcomeAnswer]
	// policies are claims with budgets to charge (policy_batch.go): a transaction per batch.
	policies *groupcommit.Batcher[policyClaim, policyAnswer]
	counters counterCache // what the policy batches last committed of each budget counter
}

func (l *Ledger) newBatchers() *batchers {
	if l.dialect != Postgres {
		return nil
	}
	return &batchers{
		claims:   groupcommit.New(groupCommitSlots, groupCommitMax, l.claimBatch),
		outcomes: groupcommit.New(groupCommitSlots, groupCommitMax, l.outcomeBatch),
		policies: groupcommit.New(groupCommitSlots, groupCommitMax, l.policyBatch),
	}
}

// claimRequest is one new operation, claimed by its first attempt, to record (submitClaimed).
type claimRequest struct {
	op      *Operation
	attempt *Attempt
	events  [2]Event // created, attempt_started
}

// claimAnswer says whether the request's own row was inserted; err is set when the batch failed.
type claimAnswer struct {
	created bool
	err     error
}

// claimBatch records reqs in one statement: each operation unless its key is taken, and the
// attempt and events of each operation it inserted.
func (l *Ledger) claimBatch(ctx context.Context, reqs []claimRequest, out []claimAnswer) {
	// Rows in the order of their keys: two batches that share keys (a duplicate sent to two
	// replicas) then wait for each other's uncommitted keys in one order, never in a cycle.
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(reqs[a].op.Tenant, reqs[b].op.Tenant), cmp.Compare(reqs[a].op.Key, reqs[b].op.Key))
	})
	s := newStatement(len(reqs) * 62)
	s.WriteString("WITH op AS (INSERT INTO operations (" + operationColumns + ") VALUES ")
	for n, i := range order {
		if n > 0 {
			s.WriteString(", ")
		}
		s.row(reqs[i].op.columns()...)
	}
	s.WriteString(" ON CONFLICT (tenant, op_key) DO NOTHING RETURNING id), " +
		"at AS (INSERT INTO attempts (id, operation_id, number, fence, worker, started_at) " +
		"SELECT v.id, v.operation_id, v.number, v.fence, v.worker, v.started_at FROM (VALUES ")
	for n, i := range order {
		if n > 0 {
			s.WriteString(", ")
		}
		a := reqs[i].attempt
		s.typedRow([]string{"text", "text", "integer", "bigint", "text", "timestamptz"},
			a.ID, a.OperationID, a.Number, a.Fence, a.Worker, a.StartedAt)
	}
	s.WriteString(") AS v (id, operation_id, number, fence, worker, started_at) JOIN op ON op.id = v.operation_id), " +
		"ev AS (INSERT INTO events (operation_id, tenant, at, type, from_state, to_state, attempt, actor, detail) " +
		"SELECT v.operation_id, v.tenant, v.at, v.type, v.from_state, v.to_state, v.attempt, v.actor, v.detail FROM (VALUES ")
	s.eventRows(func(yield func(Event) bool) {
		for _, i := range order {
			for _, e := range reqs[i].events {
				if !yield(e) {
					return
				}
			}
		}
	})
	// In their order: an event's id is its place on the operation's timeline.
	s.WriteString(") AS v (n, operation_id, tenant, at, type, from_state, to_state, attempt, actor, detail) " +
		"JOIN op ON op.id = v.operation_id ORDER BY v.n) SELECT id FROM op")

	inserted, err := l.batchIDs(ctx, s)
	for i := range reqs {
		out[i] = claimAnswer{created: inserted[reqs[i].op.ID], err: err}
	}
}

// statement is a batch's SQL, written with PostgreSQL's numbered parameters as its values are
// added: a batch's statement is long (a claim has 62 values), and GORM's building of it (its
// scan for '?' and a value at a time) cost a tenth of the gateway's CPU per new operation.
type statement struct {
	strings.Builder
	args []any
}

func newStatement(args int) *statement { return &statement{args: make([]any, 0, args)} }

// param writes v's placeholder, cast to typ unless typ is "".
func (s *statement) param(v any, typ string) {
	s.args = append(s.args, v)
	s.WriteByte('$')
	s.WriteString(strconv.Itoa(len(s.args)))
	if typ != "" {
		s.WriteString("::")
		s.WriteString(typ)
	}
}

// row writes (v1, v2, …), typed by the columns they go to.
func (s *statement) row(vs ...any) {
	s.WriteByte('(')
	for i, v := range vs {
		if i > 0 {
			s.WriteString(", ")
		}
		s.param(v, "")
	}
	s.WriteByte(')')
}

// typedRow writes (v1::t1, v2::t2, …): a VALUES list's rows are typed by no table's columns.
func (s *statement) typedRow(types []string, vs ...any) {
	s.WriteByte('(')
	for i, v := range vs {
		if i > 0 {
			s.WriteString(", ")
		}
		s.param(v, types[i])
	}
	s.WriteByte(')')
}

// eventTypes are the types of an event's row, numbered (eventRows).
var eventTypes = []string{"integer", "text", "text", "timestamptz", "text", "text", "text", "integer", "text", "text"}

// eventRows writes the VALUES rows of events, numbered in their order.
func (s *statement) eventRows(events func(yield func(Event) bool)) {
	n := 0
	for e := range events {
		if n > 0 {
			s.WriteString(", ")
		}
		s.typedRow(eventTypes, n, e.OperationID, e.Tenant, e.At, e.Type, e.FromState, e.ToState, e.Attempt, e.Actor, e.Detail)
		n++
	}
}

// batchIDs runs a batch's statement, which commits as it ends, and returns the ids it answers.
// Its error is the one its members see: a refusal by the server (nothing committed) as it is,
// anything else as a commit that was cut off.
func (l *Ledger) batchIDs(ctx context.Context, s *statement) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.batchTimeout())
	defer cancel()
	rows, err := l.db.Statement.ConnPool.QueryContext(ctx, s.String(), s.args...)
	if err != nil {
		return nil, batchError(err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, batchError(err)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, batchError(err)
	}
	if err := rows.Close(); err != nil {
		return nil, batchError(err)
	}
	return ids, nil
}

// groupCommitTimeout bounds a batch's statement: its members' own deadlines do not (it answers
// them all), and a request's write never waited longer than this for the database alone.
const groupCommitTimeout = 10 * time.Second

// batchError is a failed batch's error. errRefused marks one the server refused, which wrote
// nothing, so each member may be written again alone.
func batchError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &refusedBatch{err: err}
	}
	return err
}

// refusedBatch is a batch PostgreSQL refused (a deadlock it broke, a constraint): nothing of it
// was written.
type refusedBatch struct{ err error }

func (e *refusedBatch) Error() string { return "ledger: batch refused: " + e.err.Error() }
func (e *refusedBatch) Unwrap() error { return e.err }

// outcomeAnswer says whether the batch wrote the member's outcome; err is set when the batch failed.
type outcomeAnswer struct {
	written bool
	err     error
}

// outcomeBatch writes the outcomes of reqs in one statement, each only where its operation is
// still RUNNING on its fence with its own attempt open (both rows locked first, in the order of
// the operations' ids, which is the order every writer locks an operation before its attempt)
// and its tenant has no live webhook subscription. It answers which it wrote, by attempt.
//
// One operation has at most one member in a batch: a second outcome of it (a reaped attempt's
// late one beside its retry's) is answered "not written" at once and so decided alone, by the
// compare-and-set a lone outcome runs. Every join below is also by the member's own attempt, so
// no member is written, or answered, on the strength of another's row.
func (l *Ledger) outcomeBatch(ctx context.Context, reqs []*finishing, out []outcomeAnswer) {
	members := make([]int, 0, len(reqs))
	seen := make(map[string]bool, len(reqs))
	for i, f := range reqs {
		if seen[f.next.ID] {
			out[i] = outcomeAnswer{} // not written: decided alone
			continue
		}
		seen[f.next.ID] = true
		members = append(members, i)
	}
	s := newStatement(len(members) * 40)
	s.WriteString("WITH v (id, fence, attempt_id, state, updated_at, completed_at, result, downstream_ref, downstream_status, " +
		"error_class, error_message, ambiguous, upstream_result, finished_at, class, latency_ms, a_status, a_error, trace_id) AS (VALUES ")
	for n, i := range members {
		if n > 0 {
			s.WriteString(", ")
		}
		f := reqs[i]
		o, c := &f.next, f.closing
		s.typedRow(outcomeTypes, o.ID, f.change.fence, c.id, o.State, o.UpdatedAt, o.CompletedAt, o.Result, o.DownstreamRef, o.DownstreamStatus,
			o.ErrorClass, o.ErrorMessage, o.Ambiguous, o.UpstreamResult, c.finishedAt, c.class, c.latencyMS, c.status, c.err, c.traceID)
	}
	// ok locks what it returns, and FOR UPDATE hands back each row as it stands once locked
	// (re-checked against the conditions when a concurrent change committed meanwhile), so the
	// writes below meet exactly the rows it found, and watched is the flag a watcher set before
	// this batch could lock the row (Watch's UPDATE orders itself against it). Each write below
	// takes v's row of an attempt ok returned: never a row of v that only shares its operation.
	s.WriteString("), ok AS (SELECT o.id, a.id AS attempt_id, o.watched FROM v JOIN operations o ON o.id = v.id JOIN attempts a ON a.id = v.attempt_id " +
		"WHERE o.state = 'RUNNING' AND o.fence = v.fence AND a.operation_id = o.id AND a.fence = v.fence AND a.finished_at IS NULL " +
		"AND NOT EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.tenant = o.tenant AND s.deleted_at IS NULL) " +
		"ORDER BY o.id FOR UPDATE OF o, a), " +
		"op AS (UPDATE operations o SET state = v.state, updated_at = v.updated_at, lease_owner = NULL, lease_expires_at = NULL, " +
		"completed_at = v.completed_at, next_attempt_at = NULL, result = v.result, downstream_ref = v.downstream_ref, " +
		"downstream_status = v.downstream_status, error_class = v.error_class, error_message = v.error_message, " +
		"ambiguous = v.ambiguous, upstream_result = v.upstream_result FROM v JOIN ok ON ok.attempt_id = v.attempt_id WHERE o.id = v.id), " +
		"fin AS (UPDATE attempts a SET finished_at = v.finished_at, class = v.class, latency_ms = v.latency_ms, " +
		"downstream_status = v.a_status, error = v.a_error, trace_id = v.trace_id FROM v JOIN ok ON ok.attempt_id = v.attempt_id WHERE a.id = v.attempt_id), " +
		"ev AS (INSERT INTO events (operation_id, tenant, at, type, from_state, to_state, attempt, actor, detail) " +
		"SELECT e.operation_id, e.tenant, e.at, e.type, e.from_state, e.to_state, e.attempt, e.actor, e.detail FROM (VALUES ")
	s.eventRows(func(yield func(Event) bool) {
		for _, i := range members {
			for _, e := range reqs[i].events {
				if !yield(e) {
					return
				}
			}
		}
	})
	s.WriteString(") AS e (n, operation_id, tenant, at, type, from_state, to_state, attempt, actor, detail) " +
		"WHERE e.operation_id IN (SELECT id FROM ok) ORDER BY e.n), " +
		"n AS (SELECT pg_notify(")
	s.param(notifyChannel, "text")
	// n writes nothing, so it runs only if read: the condition reads it (once).
	s.WriteString(", id) FROM ok WHERE watched) SELECT attempt_id FROM ok WHERE (SELECT count(*) FROM n) >= 0")

	written, err := l.batchIDs(ctx, s)
	for _, i := range members {
		out[i] = outcomeAnswer{written: written[reqs[i].closing.id], err: err}
	}
}

// outcomeTypes are the types of an outcome's row (outcomeBatch's v).
var outcomeTypes = []string{"text", "bigint", "text", "text", "timestamptz", "timestamptz", "text", "text", "integer",
	"text", "text", "boolean", "text", "timestamptz", "text", "bigint", "integer", "text", "text"}
