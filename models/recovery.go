package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// dueRows selects up to limit rows matching where, locked for this transaction; on
// PostgreSQL replicas skip each other's rows instead of waiting (SKIP LOCKED).
func (l *Ledger) dueRows(tx *gorm.DB, order string, limit int, where string, args ...any) ([]*Operation, error) {
	q := tx.Where(where, args...).Order(order).Limit(limit)
	if l.dialect == Postgres {
		q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
	}
	var ops []*Operation
	return ops, q.Find(&ops).Error
}

// ExtendLease pushes the lease of a running attempt to until, if the worker still holds it.
// CodeStale means the lease was lost.
func (l *Ledger) ExtendLease(ctx context.Context, c Claimed, until time.Time) error {
	res := l.scope(ctx).Model(&Operation{}).
		Where("id = ? AND state = ? AND fence = ?", c.Op.ID, StateRunning, c.Attempt.Fence).
		// As in FinishAttempt: the token may have been issued again after a claim was lost.
		Where("EXISTS (SELECT 1 FROM attempts a WHERE a.id = ? AND a.finished_at IS NULL)", c.Attempt.ID).
		Update("lease_expires_at", until.UTC())
	if res.Error != nil {
		return unavailable("extend lease", res.Error)
	}
	if res.RowsAffected != 1 {
		return errorf(CodeStale, "lease of %s lost", c.Op.ID)
	}
	return nil
}

// ReapExpiredLeases moves RUNNING operations whose lease expired to UNKNOWN: their worker
// crashed or hung, and its request may have left. The abandoned attempt is closed as
// ambiguous. A worker that comes back finds its fencing token no longer matches.
func (l *Ledger) ReapExpiredLeases(ctx context.Context, worker string, limit int) (int, error) {
	now := l.clock()
	n := 0
	err := l.txn(ctx, "reap leases", func(tx *gorm.DB) ([]string, error) {
		ops, err := l.dueRows(tx, "lease_expires_at", limit, "state = ? AND lease_expires_at < ?", StateRunning, now)
		if err != nil {
			return nil, err
		}
		var changed []string
		for _, op := range ops {
			owner := ""
			if op.LeaseOwner != nil {
				owner = *op.LeaseOwner
			}
			err := tx.Model(&Attempt{}).Where("operation_id = ? AND fence = ? AND finished_at IS NULL", op.ID, op.Fence).
				Updates(map[string]any{"finished_at": now, "class": ErrorAmbiguous, "error": "lease expired before the outcome was recorded"}).Error
			if err != nil {
				return nil, err
			}
			err = l.transition(tx, now, op, change{from: StateRunning, to: StateUnknown, fence: op.Fence,
				actor: "worker:" + worker, attempt: op.Attempts,
				detail: map[string]any{"reason": "lease_expired", "lease_owner": owner},
				apply: func(o *Operation) []string {
					o.Ambiguous = true
					return append(setError(ErrorAmbiguous, "the worker "+owner+" stopped before recording the outcome; the request may have been sent", 0)(o), "ambiguous")
				}})
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

// ClaimProbes claims up to limit UNKNOWN operations of the given tools whose next reconcile
// probe is due. The claim bumps the fencing token and pushes next_probe_at past the probe's
// lease, so no other replica probes the same operation meanwhile, and a probe that outlives
// its lease can record nothing.
func (l *Ledger) ClaimProbes(ctx context.Context, worker string, tools []string, limit int, lease time.Duration) ([]*Operation, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	now := l.clock()
	var claimed []*Operation
	err := l.txn(ctx, "claim probes", func(tx *gorm.DB) ([]string, error) {
		ops, err := l.dueRows(tx, "next_probe_at", limit, "state = ? AND next_probe_at <= ? AND tool IN ?", StateUnknown, now, tools)
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			res := tx.Model(&Operation{}).Where("id = ? AND state = ? AND fence = ?", op.ID, StateUnknown, op.Fence).
				Updates(map[string]any{"fence": op.Fence + 1, "probes": op.Probes + 1, "next_probe_at": now.Add(lease), "updated_at": now})
			if res.Error != nil {
				return nil, res.Error
			}
			if res.RowsAffected != 1 {
				continue
			}
			op.Fence, op.Probes, op.NextProbeAt, op.UpdatedAt = op.Fence+1, op.Probes+1, ptr(now.Add(lease)), now
			if err := l.appendEvent(tx, now, eventInput{op: op, typ: EventReconcileStarted, actor: "worker:" + worker,
				detail: map[string]any{"probe": op.Probes}}); err != nil {
				return nil, err
			}
			claimed = append(claimed, op)
		}
		return nil, nil
	})
	return claimed, err
}

// ProbeOutcome is what a reconcile probe found and what the reconciler decided.
type ProbeOutcome struct {
	Status  int    // the downstream's status; 0 when no answer came
	Outcome string // found, not_found, not_settled, error
	Error   string

	To            State // SUCCEEDED, PENDING, FAILED_FINAL, or UNKNOWN (ask again)
	Result        []byte
	DownstreamRef string
	ErrorClass    string
	ErrorMessage  string
	NextProbeAt   time.Time // To UNKNOWN: when to ask again
}

// RecordProbe records a probe of op (as claimed by ClaimProbes) and applies its decision,
// fenced by the probe's token.
func (l *Ledger) RecordProbe(ctx context.Context, op *Operation, worker string, out ProbeOutcome) error {
	now := l.clock()
	actor := "worker:" + worker
	return l.txn(ctx, "record probe "+op.ID, func(tx *gorm.DB) ([]string, error) {
		detail := map[string]any{"probe": op.Probes, "outcome": out.Outcome}
		if out.Status != 0 {
			detail["downstream_status"] = out.Status
		}
		if out.Error != "" {
			detail["error"] = out.Error
		}
		if out.To == StateUnknown {
			detail["next_probe_at"] = out.NextProbeAt.UTC().Format(time.RFC3339Nano)
			res := tx.Model(&Operation{}).Where("id = ? AND state = ? AND fence = ?", op.ID, StateUnknown, op.Fence).
				Updates(map[string]any{"next_probe_at": out.NextProbeAt.UTC(), "updated_at": now})
			if res.Error != nil {
				return nil, res.Error
			}
			if res.RowsAffected != 1 {
				return nil, errorf(CodeStale, "probe of %s superseded", op.ID)
			}
			op.NextProbeAt = ptr(out.NextProbeAt.UTC())
			return nil, l.appendEvent(tx, now, eventInput{op: op, typ: EventReconcileFinished, actor: actor, detail: detail})
		}
		ch := change{from: StateUnknown, to: out.To, fence: op.Fence, actor: actor, event: EventReconcileFinished, detail: detail}
		switch out.To {
		case StateSucceeded:
			ch.apply = func(o *Operation) []string {
				o.Result, o.DownstreamRef, o.ErrorClass, o.ErrorMessage = nil, nil, nil, nil
				if len(out.Result) > 0 {
					o.Result = ptr(string(out.Result))
				}
				if out.DownstreamRef != "" {
					o.DownstreamRef = ptr(out.DownstreamRef)
				}
				// The look-up's answer is not the call's: no upstream answer to replay.
				cols := []string{"result", "downstream_ref", "error_class", "error_message"}
				return append(cols, setUpstream(o, nil)...)
			}
		case StatePending:
			ch.apply = func(o *Operation) []string {
				// Proven not executed: the retry starts from a clean slate on the
				// ambiguity flag, because the attempt it cleared was not an effect.
				o.NextAttemptAt, o.Ambiguous = ptr(now), false
				return []string{"next_attempt_at", "ambiguous"}
			}
		default:
			ch.apply = setError(out.ErrorClass, out.ErrorMessage, 0)
		}
		return []string{op.ID}, l.transition(tx, now, op, ch)
	})
}

// Unresolved returns UNKNOWN operations without an open review that have been UNKNOWN since before
// unknownBefore, oldest first: of tools, or, when tools is empty, of every tool not in known
// (tools the catalogue no longer has, which nobody can reconcile).
func (l *Ledger) Unresolved(ctx context.Context, unknownBefore time.Time, tools []string, known []string, limit int) ([]*Operation, error) {
	// "No open review", not "no review": an operation can come back to UNKNOWN after an
	// earlier review was resolved (a retry a reviewer allowed, an approved run), and must be
	// escalated again.
	q := l.scope(ctx).Where("state = ? AND unknown_since <= ? AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.operation_id = operations.id AND r.status = ?)",
		StateUnknown, unknownBefore.UTC(), ReviewOpen)
	if len(tools) > 0 {
		q = q.Where("tool IN ?", tools)
	} else if len(known) > 0 {
		q = q.Where("tool NOT IN ?", known)
	}
	var ops []*Operation
	if err := q.Order("unknown_since").Limit(limit).Find(&ops).Error; err != nil {
		return nil, unavailable("list unresolved", err)
	}
	return ops, nil
}

// OpenReview opens a review of op for reason, unless one is already open (then it returns
// CodeStale). The operation's review field shows it from then on.
func (l *Ledger) OpenReview(ctx context.Context, op *Operation, reason, actor string) (*Review, error) {
	now := l.clock()
	r := &Review{ID: newID("rev"), Tenant: op.Tenant, OperationID: op.ID, Reason: reason, Status: ReviewOpen, OpenedAt: now, OpenedBy: actor}
	err := l.txn(ctx, "open review "+op.ID, func(tx *gorm.DB) ([]string, error) {
		res := tx.Model(&Operation{}).Where("id = ? AND state = ? AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.operation_id = operations.id AND r.status = ?)",
			op.ID, op.State, ReviewOpen).
			Updates(map[string]any{"review_id": r.ID, "updated_at": now})
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected != 1 {
			return nil, errorf(CodeStale, "operation %s changed or already has a review", op.ID)
		}
		if err := tx.Create(r).Error; err != nil {
			if isUniqueViolation(err) {
				// Another escalator opened one between our check and our insert: the
				// partial unique index (one open review per operation) decided the race.
				return nil, errorf(CodeStale, "operation %s already has an open review", op.ID)
			}
			return nil, err
		}
		opened := *op
		opened.ReviewID, opened.Review, opened.UpdatedAt = &r.ID, r, now
		if err := l.announce(tx, now, &opened, notice{typ: WebhookReviewOpened, withReview: true}); err != nil {
			return nil, err
		}
		return []string{op.ID}, l.appendEvent(tx, now, eventInput{op: op, typ: EventEscalated, actor: actor,
			detail: map[string]any{"review_id": r.ID, "reason": reason}})
	})
	if err != nil {
		return nil, err
	}
	op.ReviewID, op.Review = &r.ID, r
	return r, nil
}

// Purge drops params (sealed ones too) and result of the terminal operations of tools completed
// before cutoff, keeping the tombstone (tenant, key, fingerprint, final state, id) so the key
// never runs again. It returns how many it purged (at most limit).
func (l *Ledger) Purge(ctx context.Context, tools []string, cutoff time.Time, limit int) (int, error) {
	now := l.clock()
	n := 0
	err := l.txn(ctx, "purge", func(tx *gorm.DB) ([]string, error) {
		sub := tx.Model(&Operation{}).Select("id").
			Where("tool IN ? AND purged_at IS NULL AND completed_at IS NOT NULL AND completed_at < ? AND state IN ?",
				tools, cutoff.UTC(), []State{StateSucceeded, StateFailedFinal}).Limit(limit)
		res := tx.Model(&Operation{}).Where("id IN (?)", sub).
			Updates(map[string]any{"params": nil, "params_sealed": nil, "result": nil, "upstream_result": nil, "purged_at": now})
		if res.Error != nil || res.RowsAffected == 0 {
			return nil, res.Error
		}
		n = int(res.RowsAffected)
		if err := l.forgetReplays(tx, forgetAll); err != nil { // their keys now answer 410
			return nil, err
		}
		// Webhook payloads copy the (masked) params and result: they go with the record,
		// leaving the event type, so a late redelivery still tells the receiver what happened.
		purged := tx.Model(&Operation{}).Select("id").Where("tool IN ? AND purged_at = ?", tools, now)
		return nil, tx.Exec(`UPDATE outbox SET payload = '{"type":"' || event_type || '","redacted":"the operation passed its retention"}'
			WHERE operation_id IN (?)`, purged).Error
	})
	return n, err
}
