package models

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Claimed is an operation a worker now owns, with the attempt it is to run.
type Claimed struct {
	Op      *Operation
	Attempt *Attempt
}

// AttemptOutcome is what a worker records when an attempt ends. The decision (To and what
// goes with it) was taken by the retry policy; the ledger only checks that it is legal and that
// the worker still holds the fencing token.
type AttemptOutcome struct {
	Class            string // not_sent, throttled, ambiguous, rejected, succeeded
	DownstreamStatus int    // 0 when no response was read
	Latency          time.Duration
	Error            string // transport or read error, if any
	TraceID          string
	// Note, when set, says on the attempt's event what else happened (e.g. that the effect
	// was found before anything was sent).
	Note string

	To     State
	Result []byte // SUCCEEDED: the downstream body as JSON
	// UpstreamResult is an MCP server's whole answer, on SUCCEEDED and on a rejection with
	// isError; nil otherwise and for HTTP tools.
	UpstreamResult []byte
	DownstreamRef  string
	ErrorClass     string // FAILED_FINAL / UNKNOWN: the class recorded on the operation
	ErrorMessage   string
	NextAttemptAt  time.Time // PENDING: when the retry is due
	// AbortedAt is when the attempt's connection was reset because its answer never came
	// (jobs/downstream: the attempt is over only when its request can no longer arrive); zero
	// when nothing was reset. It is recorded on the attempt's event, and an UNKNOWN outcome
	// counts its reconcile settle window from it when it is later than the recording.
	AbortedAt time.Time
}

// FinishAttempt records the end of c's attempt and moves the operation to out.To, fenced by the
// claim's token and by the attempt's own row, which must still be open. It updates c.Op in
// place. CodeStale means the lease was lost: recovery decided instead, and this worker's
// outcome is dropped whole (the attempt row keeps what recovery wrote when it took the lease
// over).
func (l *Ledger) FinishAttempt(ctx context.Context, c Claimed, worker string, out AttemptOutcome) error {
	now := l.clock()
	op := c.Op
	if out.To == StateFailedFinal && op.Ambiguous {
		// An earlier attempt may have taken effect: whatever ended this one (a refusal of
		// the retry, a request that can no longer be built), the operation's outcome is not
		// known, and only reconciliation or a reviewer may say it failed.
		out.To, out.ErrorClass = StateUnknown, ErrorAmbiguous
		out.ErrorMessage = "an earlier attempt may have taken effect; this one ended: " + out.ErrorMessage
	}
	before := *op
	_, gen := l.replays.get(op.Tenant, op.Key) // for the answer this outcome may leave to replay
	f, err := finishingOf(now, c, worker, out, &before)
	if err != nil {
		return err
	}
	if l.batch != nil && f.batchable() {
		written, err := l.finishInBatch(ctx, f)
		if err != nil {
			return err
		}
		if written {
			*op = f.next
			l.replays.put(gen, op)
			return nil
		}
		// Not written by the batch: stale, or announced to a subscription; decided alone.
	}
	err = l.txn(ctx, "finish attempt "+op.ID, func(tx *gorm.DB) ([]string, error) {
		if err := l.appendEvent(tx, now, f.finished); err != nil {
			return nil, err
		}
		// The operation's compare-and-set first, then its attempt's row: that is the lock
		// order of the lease reaper (ReapExpiredLeases) and of every other writer, the
		// operation's row before its attempt's (the other order deadlocked with a reaper that
		// held the operation and wanted the attempt), without a statement of its own to lock.
		if err := l.transition(tx, now, op, f.change); err != nil {
			return nil, err
		}
		// The attempt must still be open: the fencing token alone is not proof of the claim.
		// A claim lost with the database (a restore, an asynchronous standby promoted) can
		// be made again with the same token, by another attempt; this attempt's row is then
		// missing, or already closed by the reaper. Then nothing of this transaction stays,
		// and neither does its change of op.
		if err := l.closeAttempt(tx, f.closing); err != nil {
			return nil, err
		}
		return []string{op.ID}, nil
	})
	if ErrorCode(err) == CodeStale {
		*op = before // nothing of this outcome was recorded
	}
	if err == nil {
		// A terminal op is the row as committed: its replays need not read it back. Nothing
		// can have changed it since (a compensation or a purge needs it terminal first), and
		// gen, taken before the commit, refuses it if any invalidation arrived meanwhile.
		l.replays.put(gen, op)
	}
	return err
}

// finishing is an attempt's outcome as the ledger writes it, alone (FinishAttempt's
// transaction) or in a batch (outcomeBatch): the attempt's event, the operation's change, the
// attempt's closing, and, for a batch, the row and events the change leads to.
type finishing struct {
	finished eventInput // attempt_finished
	change   change
	closing  *attemptClose
	// next, cols: the operation's row after the change, and the columns it writes
	// (planTransition); events: the rows of finished and of the change's event.
	next       Operation
	cols       []string
	events     [2]Event
	transition Transition
}

func finishingOf(now time.Time, c Claimed, worker string, out AttemptOutcome, op *Operation) (*finishing, error) {
	at := c.Attempt
	detail := map[string]any{"attempt_id": at.ID, "class": out.Class, "latency_ms": out.Latency.Milliseconds()}
	if out.DownstreamStatus != 0 {
		detail["downstream_status"] = out.DownstreamStatus
	}
	if out.Error != "" {
		detail["error"] = out.Error
	}
	if out.Note != "" {
		detail["note"] = out.Note
	}
	if !out.AbortedAt.IsZero() {
		detail["aborted_at"] = out.AbortedAt.UTC().Format(time.RFC3339Nano)
	}
	actor := "worker:" + worker
	f := &finishing{finished: eventInput{op: op, typ: EventAttemptFinished, attempt: at.Number, actor: actor, detail: detail}}
	ch := change{from: StateRunning, to: out.To, fence: at.Fence, actor: actor, attempt: at.Number}
	ambiguous := op.Ambiguous || out.Class == ErrorAmbiguous
	switch out.To {
	case StateSucceeded:
		ch.apply = func(o *Operation) []string {
			o.Result = nil
			if len(out.Result) > 0 {
				o.Result = ptr(string(out.Result))
			}
			o.DownstreamRef = nil
			if out.DownstreamRef != "" {
				o.DownstreamRef = ptr(out.DownstreamRef)
			}
			o.DownstreamStatus = nil
			if out.DownstreamStatus != 0 {
				o.DownstreamStatus = ptr(out.DownstreamStatus)
			}
			o.ErrorClass, o.ErrorMessage = nil, nil
			cols := []string{"result", "downstream_ref", "downstream_status", "error_class", "error_message"}
			return append(cols, setUpstream(o, out.UpstreamResult)...)
		}
	case StatePending:
		ch.event = EventRetryScheduled
		ch.detail = map[string]any{"next_attempt_at": out.NextAttemptAt.UTC().Format(time.RFC3339Nano), "class": out.Class}
		ch.apply = func(o *Operation) []string {
			o.NextAttemptAt, o.Ambiguous = ptr(out.NextAttemptAt.UTC().Truncate(time.Microsecond)), ambiguous
			cols := setError(out.Class, out.ErrorMessage, out.DownstreamStatus)(o)
			return append(cols, "next_attempt_at", "ambiguous")
		}
	default: // FAILED_FINAL, UNKNOWN
		ch.apply = func(o *Operation) []string {
			o.Ambiguous = ambiguous
			cols := append(setError(out.ErrorClass, out.ErrorMessage, out.DownstreamStatus)(o), "ambiguous")
			if since := settleFrom(now, out.AbortedAt); out.To == StateUnknown && since.After(now) {
				o.UnknownSince = &since
				cols = append(cols, "unknown_since")
			}
			return append(cols, setUpstream(o, out.UpstreamResult)...)
		}
	}
	f.change = ch
	f.closing = &attemptClose{id: at.ID, finishedAt: now, class: out.Class, latencyMS: out.Latency.Milliseconds(),
		stale: &Error{Code: CodeStale, Op: op, Message: fmt.Sprintf("attempt %s of %s is not open in the ledger: its claim was lost or taken over", at.ID, op.ID)}}
	if out.DownstreamStatus != 0 {
		f.closing.status = &out.DownstreamStatus
	}
	if out.Error != "" {
		f.closing.err = &out.Error
	}
	if out.TraceID != "" {
		f.closing.traceID = &out.TraceID
	}
	if out.To != StateSucceeded && out.To != StateFailedFinal {
		return f, nil // written alone (see batchable)
	}
	// The batch's row and events. planTransition runs ch.apply on a copy of op: the change a
	// lone transaction makes is planned again from op, the same.
	var err error
	if f.next, f.cols, err = planTransition(now, op, ch); err != nil {
		return nil, err
	}
	stateChanged := eventInput{op: op, typ: EventStateChanged, from: ch.from, to: ch.to, attempt: ch.attempt, actor: actor}
	for i, in := range []eventInput{f.finished, stateChanged} {
		if f.events[i], err = newEvent(now, in); err != nil {
			return nil, err
		}
	}
	f.transition = Transition{OperationID: op.ID, Tenant: op.Tenant, Tool: op.Tool, From: ch.from, To: ch.to, Attempt: ch.attempt, Actor: actor}
	if f.next.ErrorClass != nil {
		f.transition.ErrorClass = *f.next.ErrorClass
	}
	return f, nil
}

// batchColumns are the operation's columns outcomeBatch writes: the ones a RUNNING
// operation's move to SUCCEEDED or FAILED_FINAL may change.
var batchColumns = []string{"state", "updated_at", "lease_owner", "lease_expires_at", "completed_at", "next_attempt_at",
	"result", "downstream_ref", "downstream_status", "error_class", "error_message", "ambiguous", "upstream_result"}

// batchable reports whether f may be written in a batch: an attempt that ends its operation
// SUCCEEDED or FAILED_FINAL, whose change writes only the columns a batch writes. Other
// outcomes (a retry, UNKNOWN, which opens the way to a review) are written alone.
func (f *finishing) batchable() bool {
	if f.change.to != StateSucceeded && f.change.to != StateFailedFinal {
		return false
	}
	for _, col := range f.cols {
		if !slices.Contains(batchColumns, col) {
			return false
		}
	}
	return true
}

// finishInBatch writes f in the next batch of outcomes and reports whether the batch wrote it.
// A batch the server refused wrote nothing: f is then not written, and no error is returned.
func (l *Ledger) finishInBatch(ctx context.Context, f *finishing) (written bool, err error) {
	ctx, span := l.startWrite(ctx, "finish attempt "+f.next.ID)
	transitions := []Transition{f.transition}
	defer func() {
		if !written {
			transitions = nil
		}
		endWrite(span, transitions, err)
	}()
	ans, err := l.batch.outcomes.Do(ctx, f)
	if err != nil {
		return false, unavailable("finish attempt", err) // never sent
	}
	var refused *refusedBatch
	switch {
	case errors.As(ans.err, &refused):
		return false, nil
	case ans.err != nil:
		return false, commitCutOff(l.dialect, "finish attempt", ans.err)
	case !ans.written:
		return false, nil
	}
	l.committed(ctx, []string{f.next.ID}, transitions)
	return true, nil
}

// settleFrom is when an UNKNOWN outcome's settle window starts: its recording (now), or the
// abort of the attempt's connection when that is later (a clock ahead of the ledger's), rounded
// up to the ledger's microseconds so the window is never shorter than from the abort.
func settleFrom(now, abortedAt time.Time) time.Time {
	if !abortedAt.After(now) {
		return now
	}
	t := abortedAt.UTC()
	if r := t.Truncate(time.Microsecond); r.Before(t) {
		t = r.Add(time.Microsecond)
	}
	return t
}

// attemptClose is what closing an open attempt's row writes; stale is the error when the row
// is not open any more.
type attemptClose struct {
	id         string
	finishedAt time.Time
	class      string
	latencyMS  int64
	status     *int
	err        *string
	traceID    *string
	stale      error
}

// closeAttempt closes the attempt's row if it is still open, or fails with c.stale: on
// PostgreSQL with the transaction's events, in flush's one statement (which then fails the
// transaction), elsewhere at once.
func (l *Ledger) closeAttempt(tx *gorm.DB, c *attemptClose) error {
	if v, ok := tx.Get(pendingKey); ok && l.dialect == Postgres {
		v.(*pending).closing = c
		return nil
	}
	res := tx.Model(&Attempt{}).Where("id = ? AND finished_at IS NULL", c.id).Updates(map[string]any{
		"finished_at": c.finishedAt, "class": c.class, "latency_ms": c.latencyMS,
		"downstream_status": c.status, "error": c.err, "trace_id": c.traceID})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return c.stale
	}
	return nil
}

// ClaimDue claims up to limit PENDING operations whose next attempt is due, oldest first, for
// worker. On PostgreSQL, FOR UPDATE SKIP LOCKED lets replicas claim side by side without
// waiting on each other; on SQLite the single writer serialises claims. Each claim bumps the
// fencing token and starts an attempt. An operation whose API key was revoked meanwhile ends
// FAILED_FINAL (permission_revoked) without running.
func (l *Ledger) ClaimDue(ctx context.Context, worker string, limit int, leaseFor func(tool string) time.Duration) ([]Claimed, error) {
	now := l.clock()
	var claimed []Claimed
	err := l.txn(ctx, "claim due", func(tx *gorm.DB) ([]string, error) {
		q := tx.Where("state = ? AND next_attempt_at <= ?", StatePending, now).Order("next_attempt_at, id").Limit(limit)
		if l.dialect == Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		var ops []*Operation
		if err := q.Find(&ops).Error; err != nil {
			return nil, err
		}
		if len(ops) == 0 {
			return nil, nil
		}
		revoked, err := revokedKeys(tx, ops)
		if err != nil {
			return nil, err
		}
		var changed []string
		for _, op := range ops {
			actor := "worker:" + worker
			if revoked[op.APIKeyID] {
				err := l.transition(tx, now, op, change{from: StatePending, to: StateFailedFinal, actor: actor,
					apply: setError(ErrorPermissionRevoked, "the API key that submitted this operation was revoked before it ran", 0)})
				if err != nil {
					return nil, err
				}
				changed = append(changed, op.ID)
				continue
			}
			c, err := l.claim(tx, now, op, worker, leaseFor(op.Tool))
			if err != nil {
				return nil, err
			}
			claimed = append(claimed, c)
			changed = append(changed, op.ID)
		}
		return changed, nil
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

func (l *Ledger) claim(tx *gorm.DB, now time.Time, op *Operation, worker string, lease time.Duration) (Claimed, error) {
	number, fence := op.Attempts+1, op.Fence+1
	at := &Attempt{ID: NewAttemptID(), OperationID: op.ID, Number: number, Fence: fence, Worker: worker, StartedAt: now}
	err := l.transition(tx, now, op, change{from: StatePending, to: StateRunning, actor: "worker:" + worker, attempt: number,
		apply: func(o *Operation) []string {
			o.Attempts, o.Fence = number, fence
			o.LeaseOwner, o.LeaseExpiresAt, o.NextAttemptAt = ptr(worker), ptr(now.Add(lease)), nil
			return []string{"attempts", "fence", "lease_owner", "lease_expires_at", "next_attempt_at"}
		}})
	if err != nil {
		return Claimed{}, err
	}
	if err := tx.Create(at).Error; err != nil {
		return Claimed{}, err
	}
	err = l.appendEvent(tx, now, eventInput{op: op, typ: EventAttemptStarted, attempt: number, actor: "worker:" + worker,
		detail: map[string]any{"attempt_id": at.ID, "fence": fence}})
	return Claimed{Op: op, Attempt: at}, err
}

func revokedKeys(tx *gorm.DB, ops []*Operation) (map[string]bool, error) {
	ids := make([]string, 0, len(ops))
	for _, op := range ops {
		ids = append(ids, op.APIKeyID)
	}
	var revoked []string
	err := tx.Model(&APIKey{}).Where("id IN ? AND revoked_at IS NOT NULL", ids).Pluck("id", &revoked).Error
	out := make(map[string]bool, len(revoked))
	for _, id := range revoked {
		out[id] = true
	}
	return out, err
}

// Cancel stops an operation that has not started: PENDING or AWAITING_APPROVAL → FAILED_FINAL
// (cancelled). Anything else is CodeNotCancellable, carrying the operation; so is a PENDING
// retry of an ambiguous attempt, whose effect may already have happened: FAILED_FINAL would
// say it did not.
func (l *Ledger) Cancel(ctx context.Context, tenant, id, actor string) (*Operation, error) {
	op, err := l.Get(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if err := cancellable(op); err != nil {
		return nil, err
	}
	err = l.txn(ctx, "cancel "+id, func(tx *gorm.DB) ([]string, error) {
		// The compare-and-set includes the ambiguity flag: the operation may have run an
		// ambiguous attempt and come back to PENDING since it was read.
		return []string{op.ID}, l.transition(tx, l.clock(), op, change{from: op.State, to: StateFailedFinal, actor: actor,
			unambiguous: true, apply: setError(ErrorCancelled, "cancelled at the caller's request", 0)})
	})
	if ErrorCode(err) == CodeStale {
		current, gerr := l.Get(ctx, tenant, id)
		if gerr != nil {
			return nil, gerr
		}
		if cerr := cancellable(current); cerr != nil {
			return nil, cerr
		}
		return nil, &Error{Code: CodeNotCancellable, Op: current, Message: "the operation changed meanwhile; it is now " + string(current.State)}
	}
	return op, err
}

// cancellable says why op cannot be cancelled, or nil.
func cancellable(op *Operation) error {
	switch {
	case op.State != StatePending && op.State != StateAwaitingApproval:
		return &Error{Code: CodeNotCancellable, Op: op, Message: "only PENDING or AWAITING_APPROVAL operations can be cancelled; this one is " + string(op.State)}
	case op.Ambiguous:
		return &Error{Code: CodeNotCancellable, Op: op, Message: "an earlier attempt of this operation may have taken effect " +
			"(its outcome was ambiguous), so it cannot be cancelled: it is being retried with the same downstream key"}
	}
	return nil
}

// setUpstream records an MCP server's whole answer, when the attempt had one; it writes
// nothing for an HTTP tool's attempt.
func setUpstream(o *Operation, answer []byte) []string {
	if len(answer) == 0 && o.UpstreamResult == nil {
		return nil
	}
	o.UpstreamResult = nil
	if len(answer) > 0 {
		o.UpstreamResult = ptr(string(answer))
	}
	return []string{"upstream_result"}
}
