package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/models/fingerprint"
	"gorm.io/gorm"
)

// NewOperation is what the API asks the ledger to record.
type NewOperation struct {
	Tenant      string
	PrincipalID string
	APIKeyID    string
	Key         string
	Tool        string
	// Fingerprint is Ledger.Fingerprint of Tool and Params.
	Fingerprint string
	// DownstreamKey is Ledger.DownstreamKey of Tenant and Key; empty records none, and the
	// operation sends its id instead (as operations recorded before downstream keys do).
	DownstreamKey string
	Params        []byte // canonical JSON, as sent downstream
	// Masked are Params with every sensitive value replaced by "***" (the tool's masking);
	// nil when the tool has none. With data keys, the ledger stores these and seals Params.
	Masked        []byte
	WorkflowRunID string
	StepID        string
	// Justification is the agent's reason, already masked of the call's sensitive values.
	Justification string
	// Compensates names the SUCCEEDED operation this one undoes; it is linked both ways in the
	// same transaction.
	Compensates   string
	NeedsApproval bool
	// ReviewReason is the reason of the review opened for an operation that needs approval
	// (default approval_required).
	ReviewReason string
	// Claim, when set, records the operation straight into RUNNING owned by the requesting
	// process, so the first attempt needs no second claim round trip.
	Claim *ClaimSpec
	Actor string
	// ActorUserID is the stable id of the console user who asked for it (a reviewer proposing
	// a compensation), kept on its created event: four eyes compares people by it (Person).
	ActorUserID string
	// Reason is why a person asked for this operation (a reviewer proposing a compensation):
	// kept on its created event, for the reviewers who approve it.
	Reason string
	// Policy, when set, is what the tools file's policies decided of the call and the budgets
	// it is charged to (docs/POLICY.md): the budgets are charged, and may hold or deny it, in the
	// transaction that records it; the decision is recorded with it.
	Policy *PolicyDecision
	// Audit, when set, gives the audit entry of a person's request that this operation records
	// (a reviewer's proposal of a compensation): appended in the transaction that creates the
	// operation, and only then, so the request and its entry commit together.
	Audit func(op *Operation) AuditInput
}

// ClaimSpec says who claims an operation and for how long.
type ClaimSpec struct {
	Worker   string
	LeaseFor time.Duration
}

// Submitted is the ledger's answer to Submit.
type Submitted struct {
	Op      *Operation
	Created bool
	// Attempt is the attempt the request claimed, when Created and Claim was set.
	Attempt *Attempt
}

// Submit records a new operation, or returns the one already recorded under (tenant, key).
// A known key with another fingerprint is CodeKeyMismatch; a purged one is CodeKeyExpired;
// both carry the operation. Creation is decided by the unique constraint on (tenant, key), so
// concurrent submits of one key create exactly one operation.
func (l *Ledger) Submit(ctx context.Context, in NewOperation) (Submitted, error) {
	// Replays are the common case under retries: the replay cache or one read answers them.
	cached, gen := l.replays.get(in.Tenant, in.Key)
	if cached != nil {
		return sameOperation(cached, in)
	}
	// A call submitClaimed can record in one statement is sent at once while the replay cache
	// answers replays and recent misses were mostly new keys: a key that is known then costs
	// that statement (which writes nothing) and the read, a new one the statement alone.
	// Otherwise the read comes first (missGuess).
	batchable := l.dialect == Postgres && in.Claim != nil && !in.NeedsApproval && in.Audit == nil && in.Compensates == ""
	oneStatement := batchable && in.Policy == nil
	// A call a policy allows, with budgets to charge, goes to the ledger with the others of its
	// kind in flight (policy_batch.go) unless a budget would hold or deny it.
	withBudgets := batchable && in.Policy != nil && in.Policy.Decision == PolicyAllow
	guessing := (oneStatement || withBudgets) && l.replays.isLive()
	statementFirst := guessing && l.misses.likelyNew()
	if !statementFirst {
		if op, err := l.GetByKey(ctx, in.Tenant, in.Key); err == nil {
			if guessing {
				l.misses.saw(true)
			}
			l.replays.put(gen, op)
			return sameOperation(op, in)
		} else if ErrorCode(err) != CodeNotFound {
			return Submitted{}, err
		}
		if guessing {
			l.misses.saw(false)
		}
	}

	now := l.clock()
	op := &Operation{
		ID: NewOperationID(), Tenant: in.Tenant, Key: in.Key, Tool: in.Tool,
		Fingerprint: in.Fingerprint, PrincipalID: in.PrincipalID, APIKeyID: in.APIKeyID,
		CreatedAt: now, UpdatedAt: now,
	}
	op.Params, op.ParamsSealed = l.storedParams(op.ID, in.Params, in.Masked)
	if in.DownstreamKey != "" {
		op.DownstreamKey = ptr(in.DownstreamKey)
	}
	if in.WorkflowRunID != "" {
		op.WorkflowRunID = ptr(in.WorkflowRunID)
	}
	if in.StepID != "" {
		op.StepID = ptr(in.StepID)
	}
	if in.Justification != "" {
		op.Justification = ptr(in.Justification)
	}
	if in.Compensates != "" {
		op.Compensates = ptr(in.Compensates)
	}
	var attempt *Attempt
	var review *Review
	switch {
	case in.NeedsApproval:
		op.State = StateAwaitingApproval
		reason := in.ReviewReason
		if reason == "" {
			reason = ReasonApprovalRequired
		}
		review = &Review{ID: newID("rev"), Tenant: op.Tenant, OperationID: op.ID, Reason: reason, Status: ReviewOpen, OpenedAt: now, OpenedBy: in.Actor}
		op.ReviewID, op.Review = &review.ID, review
	case in.Claim != nil:
		op.State = StateRunning
		op.Attempts, op.Fence = 1, 1
		op.LeaseOwner = ptr(in.Claim.Worker)
		op.LeaseExpiresAt = ptr(now.Add(in.Claim.LeaseFor))
		attempt = &Attempt{ID: NewAttemptID(), OperationID: op.ID, Number: 1, Fence: 1, Worker: in.Claim.Worker, StartedAt: now}
	default:
		op.State = StatePending
		op.NextAttemptAt = ptr(now)
	}

	if oneStatement {
		s, err := l.submitClaimed(ctx, in, op, attempt, now, gen)
		if statementFirst {
			code := ErrorCode(err)
			l.misses.saw(err == nil && !s.Created || code == CodeKeyMismatch || code == CodeKeyExpired)
		}
		return s, err
	}
	if withBudgets {
		s, done, err := l.submitWithBudgets(ctx, in, op, attempt, now, gen)
		if statementFirst && done {
			code := ErrorCode(err)
			l.misses.saw(err == nil && !s.Created || code == CodeKeyMismatch || code == CodeKeyExpired)
		}
		if done {
			return s, err
		}
	}
	var existing *Operation
	err := l.txn(ctx, "submit", func(tx *gorm.DB) ([]string, error) {
		if in.Policy != nil {
			decision, err := l.chargeBudgets(tx, op.Tenant, in.Policy)
			if err != nil {
				return nil, err
			}
			switch {
			case decision == PolicyDeny:
				// Nothing is recorded: the key stays unused, as for a rule's deny. A key
				// recorded meanwhile is answered from its row by the retry.
				rule, reason := in.Policy.Rule, in.Policy.Reason
				for _, b := range in.Policy.Budgets {
					if b.Decision == PolicyDeny {
						rule, reason = b.Name, b.Reason
						break
					}
				}
				return nil, DenyByPolicy(rule, reason)
			case decision == PolicyRequireApproval && op.State != StateAwaitingApproval:
				// A budget's limit would be passed: a person decides, as for a rule's hold.
				op.State, op.Attempts, op.Fence, op.LeaseOwner, op.LeaseExpiresAt, op.NextAttemptAt = StateAwaitingApproval, 0, 0, nil, nil, nil
				review = &Review{ID: newID("rev"), Tenant: op.Tenant, OperationID: op.ID, Reason: ReasonPolicy, Status: ReviewOpen, OpenedAt: now, OpenedBy: in.Actor}
				op.ReviewID, op.Review = &review.ID, review
				attempt = nil
			}
			in.Policy.Decision = decision
		}
		res := tx.Exec(insertOperation, op.columns()...)
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected == 0 { // lost the race to a concurrent submit of the same key
			existing = &Operation{}
			return nil, tx.Where("tenant = ? AND op_key = ?", in.Tenant, in.Key).Take(existing).Error
		}
		noteTransition(tx, createdTransition(op, in))
		if err := l.appendEvent(tx, now, createdEvent(op, in)); err != nil {
			return nil, err
		}
		if in.Policy != nil {
			if err := l.recordPolicy(tx, now, op, in.Policy, in.Actor); err != nil {
				return nil, err
			}
		}
		if review != nil {
			if err := tx.Create(review).Error; err != nil {
				return nil, err
			}
			if err := l.announce(tx, now, op, notice{typ: WebhookOperationAwaitingApproval},
				notice{typ: WebhookReviewOpened, withReview: true}); err != nil {
				return nil, err
			}
		}
		if attempt != nil {
			if err := tx.Create(attempt).Error; err != nil {
				return nil, err
			}
			if err := l.appendEvent(tx, now, attemptStartedEvent(op, attempt)); err != nil {
				return nil, err
			}
		}
		if in.Audit != nil {
			if _, err := l.appendAudit(tx, now, in.Audit(op)); err != nil {
				return nil, err
			}
		}
		if in.Compensates != "" {
			if err := l.linkCompensation(tx, now, op, in.Compensates, in.Actor); err != nil {
				return nil, err
			}
			return []string{op.ID, in.Compensates}, nil
		}
		return []string{op.ID}, nil
	})
	if err != nil {
		return Submitted{}, err
	}
	if existing != nil {
		return sameOperation(existing, in)
	}
	op.Policy = in.Policy
	return Submitted{Op: op, Created: true, Attempt: attempt}, nil
}

// createdEvent is the first event of op, recorded for in.
func createdEvent(op *Operation, in NewOperation) eventInput {
	detail := map[string]any{"fingerprint": op.Fingerprint}
	if r := strings.TrimSpace(in.Reason); r != "" {
		detail["reason"] = r
	}
	detail = withUserID(detail, Person{UserID: in.ActorUserID})
	return eventInput{op: op, typ: EventCreated, to: op.State, actor: in.Actor, detail: detail}
}

// attemptStartedEvent is the event of a's start.
func attemptStartedEvent(op *Operation, a *Attempt) eventInput {
	return eventInput{op: op, typ: EventAttemptStarted, attempt: a.Number, actor: "worker:" + a.Worker,
		detail: map[string]any{"attempt_id": a.ID, "fence": a.Fence}}
}

// createdTransition is the creation of op, for the observer.
func createdTransition(op *Operation, in NewOperation) Transition {
	return Transition{OperationID: op.ID, Tenant: op.Tenant, Tool: op.Tool, To: op.State, Attempt: op.Attempts, Actor: in.Actor}
}

// submitClaimed records op, claimed by attempt, in one statement on PostgreSQL: the operation
// (unless its key is taken), the attempt's row and the created and attempt_started events,
// each written only when the operation was, committed as the statement ends, with the claims
// of the requests in flight beside it (groupcommit.go). It is Submit's transaction for a call
// that needs nothing else written with it (no review, no audit entry, no compensation link,
// nothing announced): one round trip where a transaction takes four. A statement whose answer
// is lost may have committed, as a COMMIT may (commitCutOff).
func (l *Ledger) submitClaimed(ctx context.Context, in NewOperation, op *Operation, attempt *Attempt, now time.Time, gen uint64) (_ Submitted, err error) {
	req := claimRequest{op: op, attempt: attempt}
	for i, e := range []eventInput{createdEvent(op, in), attemptStartedEvent(op, attempt)} {
		if req.events[i], err = newEvent(now, e); err != nil {
			return Submitted{}, err
		}
	}
	created := []Transition{createdTransition(op, in)}
	ctx, span := l.startWrite(ctx, "submit")
	defer func() { endWrite(span, created, err) }()
	ans, err := l.batch.claims.Do(ctx, req)
	if err != nil {
		return Submitted{}, unavailable("submit", err) // never sent
	}
	var refused *refusedBatch
	if errors.As(ans.err, &refused) {
		// Nothing of the batch was written (a deadlock PostgreSQL broke, say): this claim
		// goes again, alone, and is answered for itself.
		one := []claimAnswer{{}}
		l.claimBatch(ctx, []claimRequest{req}, one)
		ans = one[0]
	}
	if ans.err != nil {
		return Submitted{}, commitCutOff(l.dialect, "submit", ans.err)
	}
	if !ans.created { // the key is known: recorded before, or by a concurrent submit now committed
		created = nil
		existing, err := l.GetByKey(ctx, in.Tenant, in.Key)
		if err != nil {
			return Submitted{}, err
		}
		l.replays.put(gen, existing)
		return sameOperation(existing, in)
	}
	l.committed(ctx, []string{op.ID}, created)
	return Submitted{Op: op, Created: true, Attempt: attempt}, nil
}

// submitWithBudgets records op, claimed by attempt, with the batch of new operations with
// budgets in flight (policy_batch.go). done is false when the batch did not decide it (a budget
// holds or denies it, or the batch wrote nothing): Submit's transaction then does.
func (l *Ledger) submitWithBudgets(ctx context.Context, in NewOperation, op *Operation, attempt *Attempt, now time.Time, gen uint64) (_ Submitted, done bool, err error) {
	req := policyClaim{claim: claimRequest{op: op, attempt: attempt}, policy: in.Policy, actor: in.Actor}
	for i, e := range []eventInput{createdEvent(op, in), attemptStartedEvent(op, attempt)} {
		if req.claim.events[i], err = newEvent(now, e); err != nil {
			return Submitted{}, true, err
		}
	}
	ans, err := l.batch.policies.Do(ctx, req)
	if err != nil {
		return Submitted{}, true, unavailable("submit", err) // never sent
	}
	if ans.alone {
		return Submitted{}, false, nil
	}
	created := []Transition{createdTransition(op, in)}
	ctx, span := l.startWrite(ctx, "submit")
	defer func() { endWrite(span, created, err) }()
	if ans.err != nil {
		return Submitted{}, true, commitCutOff(l.dialect, "submit", ans.err)
	}
	if !ans.created { // the key is known: recorded before, or by a concurrent submit now committed
		created = nil
		existing, err := l.GetByKey(ctx, in.Tenant, in.Key)
		if err != nil {
			return Submitted{}, true, err
		}
		l.replays.put(gen, existing)
		s, err := sameOperation(existing, in)
		return s, true, err
	}
	l.committed(ctx, []string{op.ID}, created)
	op.Policy = in.Policy
	return Submitted{Op: op, Created: true, Attempt: attempt}, true, nil
}

// insertOperation records a new operation unless its key is taken. Written out rather than
// built by GORM's Create: it runs for every new operation, and reflecting over the struct's
// 36 fields cost more CPU than the statement's own execution. Its arguments are
// Operation.columns, whose pointers the driver reads (a nil pointer is NULL).
var insertOperation = "INSERT INTO operations (" + operationColumns + ") VALUES (" +
	strings.TrimSuffix(strings.Repeat("?, ", strings.Count(operationColumns, ",")+1), ", ") +
	") ON CONFLICT (tenant, op_key) DO NOTHING"

// sameOperation decides what a known key means for this request.
func sameOperation(op *Operation, in NewOperation) (Submitted, error) {
	if op.PurgedAt != nil {
		return Submitted{}, &Error{Code: CodeKeyExpired, Op: op,
			Message: "the record of this operation key passed its retention; the key can never run again"}
	}
	if !sameFingerprint(op.Fingerprint, in) {
		return Submitted{}, &Error{Code: CodeKeyMismatch, Op: op,
			Message: "this operation key was first used with another tool or other params"}
	}
	return Submitted{Op: op}, nil
}

// sameFingerprint reports whether a request with in's call matches the recorded fingerprint
// fp. An operation recorded before fingerprints were keyed holds the plain form
// (fingerprint.Legacy): its retries are compared in that form, computed from the request, so
// they still replay rather than mismatch. Nothing stored is rewritten, so the approvals bound
// to that fingerprint keep counting.
func sameFingerprint(fp string, in NewOperation) bool {
	if fp == in.Fingerprint {
		return true
	}
	return strings.HasPrefix(fp, fingerprint.LegacyPrefix) && fp == fingerprint.Legacy(in.Tool, in.Params)
}

// CompensationRefusal says why the ledger will not have op compensated, or returns nil: only a
// SUCCEEDED operation can be undone (docs/STATES.md), and only while its record is kept, since its
// params and result build the compensating call. It is CodeNotCompensable, carrying op. An
// operation already compensated is not refused here: a repeated request replays its
// compensation, and linking refuses a second, different one.
func (op *Operation) CompensationRefusal() error {
	refuse := func(format string, args ...any) error {
		return &Error{Code: CodeNotCompensable, Op: op, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case op.State != StateSucceeded:
		return refuse("only SUCCEEDED operations can be compensated; this one is %s", op.State)
	case op.PurgedAt != nil || op.Params == nil:
		return refuse("the operation's record passed its retention; its compensation cannot be built")
	}
	return nil
}

// linkCompensation links op as the compensation of originalID. Its condition is
// CompensationRefusal's, checked again atomically, and once only: a second compensation of the
// same operation is refused.
func (l *Ledger) linkCompensation(tx *gorm.DB, now time.Time, op *Operation, originalID, actor string) error {
	res := tx.Model(&Operation{}).
		Where("id = ? AND tenant = ? AND state = ? AND purged_at IS NULL AND compensated_by IS NULL", originalID, op.Tenant, StateSucceeded).
		Update("compensated_by", op.ID) // updated_at stays: a terminal record's answer must not drift
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return &Error{Code: CodeNotCompensable, Message: "the operation is not SUCCEEDED or already has a compensation"}
	}
	if err := l.forgetReplays(tx, originalID); err != nil { // its answer now names its compensation
		return err
	}
	original := &Operation{ID: originalID, Tenant: op.Tenant}
	for _, e := range []eventInput{
		{op: original, typ: EventCompensationLinked, actor: actor, detail: map[string]any{"compensated_by": op.ID}},
		{op: op, typ: EventCompensationLinked, actor: actor, detail: map[string]any{"compensates": originalID}},
	} {
		if err := l.appendEvent(tx, now, e); err != nil {
			return err
		}
	}
	return nil
}
