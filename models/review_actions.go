package models

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Review actions (docs/CONSOLE.md), as recorded in review_action events.
const (
	ActionConfirmSucceeded   = "confirm_succeeded"
	ActionConfirmNotExecuted = "confirm_not_executed"
	ActionMarkFailed         = "mark_failed"
	ActionReconcileNow       = "reconcile_now"
	ActionApprove            = "approve"
	ActionReject             = "reject"
)

// Action is a person's decision about one operation. ExpectedState and ExpectedAttempts are
// the state and the attempt count the person saw when deciding: if the operation moved
// meanwhile, even out of that state and back into it with a new attempt, the action is
// refused (CodeStale) rather than applied to a situation nobody looked at. Scope is the person's: an operation
// outside it is CodeNotFound, and the zero Scope acts on nothing.
type Action struct {
	Scope       Scope
	Tenant      string
	OperationID string
	Actor       string // user:<email>, for people to read
	// UserID is the acting user's stable id: who they are, whatever their email is now. Four
	// eyes and distinct approvers are counted by it (Person).
	UserID        string
	Reason        string
	ExpectedState State
	// ExpectedAttempts is checked whenever ExpectedState is given: an UNKNOWN operation the
	// reviewer found not executed may since have been retried, and become UNKNOWN again
	// through an attempt the reviewer never looked into.
	ExpectedAttempts int
	RequestID        string // for the audit entry
}

// act runs fn on the operation locked for this transaction, after the checks every action
// shares: a reason, the state the person saw, and a state the action applies to.
func (l *Ledger) act(ctx context.Context, name string, a Action, allowed State, fn func(tx *gorm.DB, now time.Time, op *Operation) error) (*Operation, error) {
	if !a.Scope.Allows(a.Tenant) {
		return nil, errorf(CodeNotFound, "operation not found")
	}
	// Asking the downstream now changes nothing the ledger would not do by itself: it needs no
	// reason. Every decision does.
	if strings.TrimSpace(a.Reason) == "" && name != ActionReconcileNow {
		return nil, errorf(CodeInvalid, "a reason is required")
	}
	var op Operation
	err := l.txn(ctx, "review action on "+a.OperationID, func(tx *gorm.DB) ([]string, error) {
		q := tx.Where("tenant = ? AND id = ?", a.Tenant, a.OperationID)
		if l.dialect == Postgres {
			// Serialises actions on one operation, so two approvals are counted together.
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		if err := q.Take(&op).Error; err != nil {
			if notFound(err) {
				return nil, errorf(CodeNotFound, "operation not found")
			}
			return nil, err
		}
		if (a.ExpectedState != "" && op.State != a.ExpectedState) || op.State != allowed {
			return nil, &Error{Code: CodeStale, Op: &op,
				Message: "the operation is " + string(op.State) + " now, not " + string(allowed) + "; nothing was changed. Reload the page and decide again."}
		}
		if a.ExpectedState != "" && op.Attempts != a.ExpectedAttempts {
			return nil, &Error{Code: CodeStale, Op: &op,
				Message: fmt.Sprintf("the operation has had %d attempts now, not %d as when you looked; nothing was changed. Reload the page and decide again.",
					op.Attempts, a.ExpectedAttempts)}
		}
		now := l.clock()
		if err := fn(tx, now, &op); err != nil {
			return nil, err
		}
		// The action and its audit entry commit together, or neither does.
		_, err := l.appendAudit(tx, now, AuditInput{Actor: a.Actor, Action: "review." + name, Tenant: op.Tenant,
			OperationID: op.ID, Outcome: "ok", RequestID: a.RequestID,
			Detail: map[string]any{"reason": strings.TrimSpace(a.Reason), "state": string(op.State)}})
		return []string{op.ID}, err
	})
	if err != nil {
		return nil, err
	}
	return &op, nil
}

// detail is the detail of the action's review_action event: what was decided, why, and by
// whom (the user id beside the recorded actor).
func (a Action) detail(action string, extra map[string]any) map[string]any {
	d := map[string]any{"action": action, "reason": strings.TrimSpace(a.Reason)}
	for k, v := range extra {
		d[k] = v
	}
	return withUserID(d, a.Person())
}

// ConfirmSucceeded records a reviewer's finding that an UNKNOWN operation took effect, with
// the downstream's reference and, optionally, its result (JSON).
func (l *Ledger) ConfirmSucceeded(ctx context.Context, a Action, reference string, result []byte) (*Operation, error) {
	if strings.TrimSpace(reference) == "" {
		return nil, errorf(CodeInvalid, "the downstream reference is required")
	}
	if len(result) > 0 && !json.Valid(result) {
		return nil, errorf(CodeInvalid, "the result must be JSON")
	}
	return l.act(ctx, ActionConfirmSucceeded, a, StateUnknown, func(tx *gorm.DB, now time.Time, op *Operation) error {
		return l.transition(tx, now, op, change{from: StateUnknown, to: StateSucceeded, actor: a.Actor, event: EventReviewAction,
			detail: a.detail(ActionConfirmSucceeded, map[string]any{"downstream_ref": reference}),
			apply: func(o *Operation) []string {
				o.DownstreamRef, o.Result, o.ErrorClass, o.ErrorMessage = ptr(strings.TrimSpace(reference)), nil, nil, nil
				if len(result) > 0 {
					o.Result = ptr(string(result))
				}
				// A reviewer's finding is not the upstream's answer: nothing of one to replay.
				return append([]string{"downstream_ref", "result", "error_class", "error_message"}, setUpstream(o, nil)...)
			}})
	})
}

// ConfirmNotExecuted records a reviewer's finding that an UNKNOWN operation did not take
// effect: it goes back to PENDING and is retried.
func (l *Ledger) ConfirmNotExecuted(ctx context.Context, a Action) (*Operation, error) {
	return l.act(ctx, ActionConfirmNotExecuted, a, StateUnknown, func(tx *gorm.DB, now time.Time, op *Operation) error {
		return l.transition(tx, now, op, change{from: StateUnknown, to: StatePending, actor: a.Actor, event: EventReviewAction,
			detail: a.detail(ActionConfirmNotExecuted, nil),
			apply: func(o *Operation) []string {
				o.NextAttemptAt, o.Ambiguous = ptr(now), false
				return []string{"next_attempt_at", "ambiguous"}
			}})
	})
}

// MarkFailed ends an UNKNOWN operation as FAILED_FINAL on a reviewer's word.
func (l *Ledger) MarkFailed(ctx context.Context, a Action) (*Operation, error) {
	return l.act(ctx, ActionMarkFailed, a, StateUnknown, func(tx *gorm.DB, now time.Time, op *Operation) error {
		return l.transition(tx, now, op, change{from: StateUnknown, to: StateFailedFinal, actor: a.Actor, event: EventReviewAction,
			detail: a.detail(ActionMarkFailed, nil),
			apply:  setError(ErrorRejectedByReviewer, "marked failed by "+a.Actor+": "+strings.TrimSpace(a.Reason), 0)})
	})
}

// ReconcileNow asks the reconciler to probe an UNKNOWN operation at once.
func (l *Ledger) ReconcileNow(ctx context.Context, a Action) (*Operation, error) {
	return l.act(ctx, ActionReconcileNow, a, StateUnknown, func(tx *gorm.DB, now time.Time, op *Operation) error {
		if err := tx.Model(&Operation{}).Where("id = ?", op.ID).Updates(map[string]any{"next_probe_at": now, "updated_at": now}).Error; err != nil {
			return err
		}
		op.NextProbeAt, op.UpdatedAt = ptr(now), now
		return l.appendEvent(tx, now, eventInput{op: op, typ: EventReviewAction, actor: a.Actor,
			detail: a.detail(ActionReconcileNow, nil)})
	})
}

// Reject ends an operation awaiting approval as FAILED_FINAL (rejected_by_reviewer).
func (l *Ledger) Reject(ctx context.Context, a Action) (*Operation, error) {
	return l.act(ctx, ActionReject, a, StateAwaitingApproval, func(tx *gorm.DB, now time.Time, op *Operation) error {
		return l.transition(tx, now, op, change{from: StateAwaitingApproval, to: StateFailedFinal, actor: a.Actor, event: EventReviewAction,
			detail: a.detail(ActionReject, nil),
			apply:  setError(ErrorRejectedByReviewer, "rejected by "+a.Actor+": "+strings.TrimSpace(a.Reason), 0)})
	})
}

// Approval says where an operation stands after an approval.
type Approval struct {
	Op       *Operation
	Count    int // distinct reviewers whose approval counts
	Required int
}

// Approve records a reviewer's approval of an operation awaiting it. Approvals are bound to
// the operation's fingerprint and counted per distinct reviewer; those older than ttl have
// lapsed. Once required approvals are in, the operation moves to PENDING and runs. A
// compensation must be approved by someone other than who proposed it (four eyes).
func (l *Ledger) Approve(ctx context.Context, a Action, required int, ttl time.Duration) (Approval, error) {
	required = max(required, 1)
	var res Approval
	op, err := l.act(ctx, ActionApprove, a, StateAwaitingApproval, func(tx *gorm.DB, now time.Time, op *Operation) error {
		var evs []Event
		if err := tx.Where("operation_id = ? AND type IN ?", op.ID, []string{EventCreated, EventReviewAction}).Order("id").Find(&evs).Error; err != nil {
			return err
		}
		me := a.Person()
		if op.Compensates != nil && ProposerOf(evs).Is(me) {
			return errorf(CodeInvalid, "four eyes: %s proposed this compensation, so another reviewer must approve it", me.Name())
		}
		approvers := ApproversOf(op, evs, ttl, now)
		if me.Among(approvers) {
			return errorf(CodeInvalid, "%s has already approved this operation; %d approvals by different reviewers are required", me.Name(), required)
		}
		approvers = append(approvers, me)
		res.Count, res.Required = len(approvers), required
		err := l.appendEvent(tx, now, eventInput{op: op, typ: EventReviewAction, actor: a.Actor,
			detail: a.detail(ActionApprove, map[string]any{"fingerprint": op.Fingerprint, "approvals": len(approvers), "required": required})})
		if err != nil || len(approvers) < required {
			return err
		}
		return l.transition(tx, now, op, change{from: StateAwaitingApproval, to: StatePending, actor: a.Actor,
			detail: map[string]any{"approvals": len(approvers)},
			apply: func(o *Operation) []string {
				o.NextAttemptAt = ptr(now)
				return []string{"next_attempt_at"}
			}})
	})
	res.Op = op
	return res, err
}

// ApproversOf lists, in the order they approved, the distinct people whose approval of op
// still counts at now: approvals recorded in its review_action events, bound to its current
// fingerprint and no older than ttl. One person is counted once, whatever email each of their
// approvals was made under (Person). Approve counts with it; the console shows it.
func ApproversOf(op *Operation, events []Event, ttl time.Duration, now time.Time) []Person {
	var out []Person
	for _, e := range events {
		if e.Type != EventReviewAction || e.Detail == nil || now.Sub(e.At) > ttl {
			continue
		}
		var d struct{ Action, Fingerprint string }
		if json.Unmarshal([]byte(*e.Detail), &d) != nil || d.Action != ActionApprove || d.Fingerprint != op.Fingerprint {
			continue
		}
		if p := e.Person(); !p.Among(out) {
			out = append(out, p)
		}
	}
	return out
}

// ProposerOf returns who recorded an operation (its created event's): for a compensation, the
// reviewer or agent who proposed it, who may not approve it (four eyes).
func ProposerOf(events []Event) Person {
	for _, e := range events {
		if e.Type == EventCreated {
			return e.Person()
		}
	}
	return Person{}
}

// ProposalReasonOf returns the reason recorded with an operation's creation: for a
// compensation, why the reviewer proposed it; "" when none was given.
func ProposalReasonOf(events []Event) string {
	for _, e := range events {
		if e.Type == EventCreated && e.Detail != nil {
			var d struct{ Reason string }
			if json.Unmarshal([]byte(*e.Detail), &d) == nil {
				return d.Reason
			}
		}
	}
	return ""
}

// LapseApprovals ends operations of tools that have awaited approval longer than ttl: an
// approval not given in time must not authorise the action later.
func (l *Ledger) LapseApprovals(ctx context.Context, worker string, tools []string, ttl time.Duration, limit int) (int, error) {
	now := l.clock()
	n := 0
	err := l.txn(ctx, "lapse approvals", func(tx *gorm.DB) ([]string, error) {
		ops, err := l.dueRows(tx, "created_at", limit, "state = ? AND tool IN ? AND created_at < ?", StateAwaitingApproval, tools, now.Add(-ttl))
		if err != nil {
			return nil, err
		}
		var changed []string
		for _, op := range ops {
			err := l.transition(tx, now, op, change{from: StateAwaitingApproval, to: StateFailedFinal, actor: "worker:" + worker,
				apply: setError(ErrorCancelled, "the approval window ("+ttl.String()+") lapsed before enough reviewers approved", 0)})
			if err != nil {
				return nil, err
			}
			changed = append(changed, op.ID)
		}
		n = len(changed)
		return changed, nil
	})
	return n, err
}
