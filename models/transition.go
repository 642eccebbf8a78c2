package models

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// ErrIllegalTransition is what the ledger answers a transition docs/STATES.md does not allow. No
// exported function asks for one; it is the state machine's last line of defence.
var ErrIllegalTransition = errors.New("illegal transition")

// change is one state transition: a compare-and-set on the current state (and on the fencing
// token when a worker writes) plus its event, in the caller's transaction.
type change struct {
	from, to State
	// fence, when non-zero, must still be the operation's token: a worker whose lease was
	// taken over can record nothing.
	fence int64
	// unambiguous, when set, requires that no earlier attempt was ambiguous: the change may
	// not end an operation whose effect may already have happened.
	unambiguous bool
	actor       string
	event       string // default EventStateChanged
	attempt     int
	detail      map[string]any
	// apply sets the columns this change writes besides the common ones; it returns their
	// names.
	apply func(op *Operation) []string
}

// transition writes c against op (which must hold the current row) and updates op in place.
// Zero rows touched means someone else decided first: CodeStale.
func (l *Ledger) transition(tx *gorm.DB, now time.Time, op *Operation, c change) error {
	next, cols, err := planTransition(now, op, c)
	if err != nil {
		return err
	}
	q, args := compareAndSet(&next, cols, op.ID, c)
	res := tx.Exec(q, args...)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return &Error{Code: CodeStale, Op: op,
			Message: fmt.Sprintf("operation %s is no longer %s (or its lease was taken over)", op.ID, c.from)}
	}
	var notices []notice
	if c.from == StateUnknown || c.from == StateAwaitingApproval {
		// The question any open review asked is answered: close it, saying by whom and how.
		// By operation, not by the review id in op: a review may have been opened since op
		// was read (the escalator runs beside a reconcile probe).
		resolution := "operation moved to " + string(c.to)
		resolved, err := resolveOpenReview(tx, now, op.ID, c.actor, resolution)
		if err != nil {
			return err
		}
		if resolved {
			notices = append(notices, notice{typ: WebhookReviewResolved, withReview: true})
		}
		if next.Review != nil {
			r := *next.Review
			r.Status, r.ResolvedAt, r.ResolvedBy, r.Resolution = ReviewResolved, ptr(now), ptr(c.actor), ptr(resolution)
			next.Review = &r
		}
	}
	if typ := operationEventFor(c.to); typ != "" {
		notices = append(notices, notice{typ: typ})
	}
	// The notifications commit with the change, or neither does (docs/WEBHOOKS.md).
	if err := l.announce(tx, now, &next, notices...); err != nil {
		return err
	}
	ev := c.event
	if ev == "" {
		ev = EventStateChanged
	}
	if err := l.appendEvent(tx, now, eventInput{op: op, typ: ev, from: c.from, to: c.to,
		attempt: c.attempt, actor: c.actor, detail: c.detail}); err != nil {
		return err
	}
	t := Transition{OperationID: op.ID, Tenant: op.Tenant, Tool: op.Tool, From: c.from, To: c.to, Attempt: c.attempt, Actor: c.actor}
	if next.ErrorClass != nil {
		t.ErrorClass = *next.ErrorClass
	}
	noteTransition(tx, t)
	*op = next
	return nil
}

// planTransition is what transition writes, before anything is written: op's row after c,
// and the columns c changes.
func planTransition(now time.Time, op *Operation, c change) (next Operation, cols []string, err error) {
	if !CanTransition(c.from, c.to) {
		return next, nil, fmt.Errorf("ledger: %s → %s for %s: %w", c.from, c.to, op.ID, ErrIllegalTransition)
	}
	next = *op
	next.State, next.UpdatedAt = c.to, now
	cols = []string{"state", "updated_at"}
	if c.from == StateRunning {
		next.LeaseOwner, next.LeaseExpiresAt = nil, nil
		cols = append(cols, "lease_owner", "lease_expires_at")
	}
	switch {
	case c.to.Terminal():
		next.CompletedAt, next.NextAttemptAt = ptr(now), nil
		cols = append(cols, "completed_at", "next_attempt_at")
	case c.to == StateUnknown:
		// The reconciler asks at once; the settle window decides what a "not found" means.
		next.UnknownSince, next.NextAttemptAt, next.NextProbeAt, next.Probes = ptr(now), nil, ptr(now), 0
		cols = append(cols, "unknown_since", "next_attempt_at", "next_probe_at", "probes")
	}
	if c.apply != nil {
		cols = append(cols, c.apply(&next)...)
	}
	return next, cols, nil
}

// compareAndSet is the UPDATE of transition: next's columns cols, where op id is still in
// c.from (and holds c's fence, and was never ambiguous, when c says so). Written out rather
// than built by GORM from the struct: every attempt's outcome runs it, and reflecting over
// the struct cost more CPU than the statement's execution.
func compareAndSet(next *Operation, cols []string, id string, c change) (string, []any) {
	fields := next.columns()
	var q strings.Builder
	args := make([]any, 0, len(cols)+4)
	q.WriteString("UPDATE operations SET ")
	seen := make(map[string]bool, len(cols))
	for _, col := range cols {
		if seen[col] {
			continue // a change may name a column the common ones already set
		}
		seen[col] = true
		i, ok := operationColumnIndex[col]
		if !ok {
			panic("ledger: transition sets unknown column " + col)
		}
		if len(seen) > 1 {
			q.WriteString(", ")
		}
		q.WriteString(col + " = ?")
		args = append(args, fields[i])
	}
	q.WriteString(" WHERE id = ? AND state = ?")
	args = append(args, id, c.from)
	if c.fence != 0 {
		q.WriteString(" AND fence = ?")
		args = append(args, c.fence)
	}
	if c.unambiguous {
		q.WriteString(" AND NOT ambiguous")
	}
	return q.String(), args
}

// operationColumnIndex finds a column's place in operationColumns (and Operation.columns).
var operationColumnIndex = func() map[string]int {
	m := map[string]int{}
	for i, col := range strings.Split(operationColumns, ",") {
		m[strings.TrimSpace(col)] = i
	}
	return m
}()

// setError returns an apply func recording an error on the operation.
func setError(class, message string, status int) func(op *Operation) []string {
	return func(op *Operation) []string {
		op.ErrorClass, op.ErrorMessage = ptr(class), ptr(message)
		if status != 0 {
			op.DownstreamStatus = ptr(status)
		}
		return []string{"error_class", "error_message", "downstream_status"}
	}
}

// resolveOpenReview closes the operation's open review, if any, and reports whether it did.
func resolveOpenReview(tx *gorm.DB, now time.Time, operationID, actor, resolution string) (bool, error) {
	res := tx.Model(&Review{}).Where("operation_id = ? AND status = ?", operationID, ReviewOpen).
		Updates(map[string]any{"status": ReviewResolved, "resolved_at": now, "resolved_by": actor, "resolution": resolution})
	return res.RowsAffected == 1, res.Error
}
