package jobs

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"go.opentelemetry.io/otel/trace"
)

// SubmitRequest is an agent's request after every check of docs/API.md has passed.
type SubmitRequest struct {
	Caller        *models.Caller
	Key           string
	Tool          *catalog.Tool
	Params        []byte // canonical JSON
	WorkflowRunID string
	StepID        string
	// Justification is the agent's reason for the call (docs/API.md): kept with the operation the
	// first time, masked of the call's sensitive values, never part of the fingerprint.
	Justification string
	Compensates   string
	Wait          time.Duration
}

// SubmitResult says what became of a request.
type SubmitResult struct {
	Op *models.Operation
	// Created: this request recorded the operation; otherwise the key was known.
	Created bool
}

// Submit records the operation (or finds the one already recorded under its key), runs its
// first attempt inline when it is new and needs no approval, and waits up to req.Wait for it
// to become terminal. A duplicate never executes anything: it waits on the same operation.
func (e *Executor) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	if err := e.checkTenantSecrets(ctx, req); err != nil {
		return SubmitResult{}, err
	}
	policy, err := e.policyFor(ctx, req)
	if err != nil {
		if denied, ok := models.PolicyDenial(err); ok {
			e.auditDenied(ctx, req, denied)
		}
		return SubmitResult{}, err
	}
	in, err := e.newOperation(req.Caller.Tenant, req.Key, req.Tool, req.Params)
	if err != nil {
		return SubmitResult{}, err
	}
	in.PrincipalID, in.APIKeyID, in.Actor = req.Caller.PrincipalID, req.Caller.Key.ID, req.Caller.Actor()
	in.WorkflowRunID, in.StepID, in.Compensates = req.WorkflowRunID, req.StepID, req.Compensates
	in.Justification = maskedJustification(req.Tool, req.Params, req.Justification)
	in.NeedsApproval = req.Tool.Review.RequireApproval
	if in.Policy = policy; policy != nil && policy.Decision == models.PolicyRequireApproval {
		in.NeedsApproval, in.ReviewReason = true, models.ReasonPolicy
	}
	in.Claim = &models.ClaimSpec{Worker: e.worker, LeaseFor: e.LeaseFor(req.Tool.Name)}
	s, err := e.ledger.Submit(ctx, in)
	if err != nil {
		if denied, ok := models.PolicyDenial(err); ok { // a budget's deny, decided as it was charged
			e.auditDenied(ctx, req, denied)
		}
		return SubmitResult{}, err
	}
	if !s.Created {
		e.ledger.NoteRepeat(s.Op) // shown on the operation's timeline
		op, err := e.Wait(ctx, s.Op, req.Wait)
		return SubmitResult{Op: op}, err
	}
	if s.Attempt == nil { // awaiting approval: nothing runs until reviewers decide
		return SubmitResult{Op: s.Op, Created: true}, nil
	}
	// The attempt goroutine owns s.Op from here; we answer from a snapshot.
	snapshot := *s.Op
	deadline := time.Now().Add(req.Wait)
	done := e.start(trace.SpanContextFromContext(ctx), models.Claimed{Op: s.Op, Attempt: s.Attempt})
	timer := time.NewTimer(req.Wait)
	defer timer.Stop()
	select {
	case op := <-done:
		if op == nil { // lease lost: recovery decided; Wait reads what it decided
			op = &snapshot
		}
		op, err := e.Wait(ctx, op, time.Until(deadline))
		return SubmitResult{Op: op, Created: true}, err
	case <-timer.C:
	case <-ctx.Done():
	}
	return SubmitResult{Op: &snapshot, Created: true}, nil
}

// checkTenantSecrets refuses a new key whose tool needs a {tenant: …} secret the tenant has not
// set (docs/TOOLS.md): nothing is recorded, nothing is sent. A known key is answered as usual, by
// Submit: a replay needs no downstream. A key recorded between this look-up and Submit's
// would have been refused here too, and a retry with it then replays.
func (e *Executor) checkTenantSecrets(ctx context.Context, req SubmitRequest) error {
	needs := req.Tool.TenantSecrets()
	if len(needs) == 0 {
		return nil
	}
	names := make([]string, 0, len(needs))
	for _, n := range needs {
		names = append(names, n.Secret)
	}
	tenant := req.Caller.Tenant
	missing, err := e.ledger.MissingTenantSecrets(ctx, tenant, names)
	if err != nil || len(missing) == 0 {
		return err
	}
	if _, err := e.ledger.GetByKey(ctx, tenant, req.Key); err == nil {
		return nil
	} else if models.ErrorCode(err) != models.CodeNotFound {
		return err
	}
	for _, n := range needs {
		if n.Secret == missing[0] {
			return models.Errorf(models.CodeConnectionNotConfigured,
				"connection %q needs the tenant secret %q, which tenant %q has not set (idemgate secret set --tenant %s %s); nothing was recorded",
				n.Connection, n.Secret, tenant, tenant, n.Secret)
		}
	}
	return nil
}

// newOperation is the ledger's record of a call of tool with canonical params under the
// operation key of tenant: its fingerprint and downstream key under the ledger's key
// (docs/STATES.md), and, for a tool with sensitive params, the masked params the ledger keeps in
// place of the clear ones when it seals them (only then: a replay need not mask): each
// sensitive value in the safe form people may see ("•••• 4242", or "***"), which the API masks
// again, so the console never needs the data key to show it.
func (e *Executor) newOperation(tenant, key string, tool *catalog.Tool, params []byte) (models.NewOperation, error) {
	in := models.NewOperation{Tenant: tenant, Key: key, Tool: tool.Name, Params: params,
		Fingerprint: e.ledger.Fingerprint(tool.Name, params), DownstreamKey: e.ledger.DownstreamKey(tenant, key)}
	if len(tool.SensitiveParams) > 0 && e.ledger.SealsParams() {
		masked, err := tool.RevealCanonical(params) // "***" but for the safe forms people see
		if err != nil {
			return in, err
		}
		in.Masked = masked
	}
	return in, nil
}

// A waiter reads its operation again after pollInterval, then after twice that, up to
// maxPollInterval: that bounds how long it may miss a change made by another process (on
// PostgreSQL, LISTEN/NOTIFY usually wakes it sooner; changes made in this process wake it at
// once). Backing off, with jitter, matters under a storm of duplicates: a thousand waiters
// reading every 250 ms kept SQLite's one connection so busy that the attempt they waited for
// could not record its outcome before their waits ran out.
const (
	pollInterval    = 250 * time.Millisecond
	maxPollInterval = 2 * time.Second
)

// What ended a wait (Meter.Waited): a change notice (from this process, or another replica's
// through the ledger's listener) after which the operation was settled; a read on the poll
// timer, or the first read, that found it settled; the wait running out; or the request going
// away.
const (
	WaitNotified  = "notified"
	WaitPolled    = "polled"
	WaitDeadline  = "deadline"
	WaitCancelled = "cancelled"
)

// Wait returns op once it is terminal, or waits for people (approval, or an UNKNOWN outcome
// no code can reconcile), or wait has passed, whichever comes first. Changes made in this
// process wake it at once; those of other replicas through the ledger's listener or polling.
func (e *Executor) Wait(ctx context.Context, op *models.Operation, wait time.Duration) (*models.Operation, error) {
	if e.settled(op) {
		return op, nil // nothing to wait for: not counted as a wait
	}
	deadline := time.Now().Add(wait)
	poll := pollInterval
	woke := WaitPolled
	watching := false
	for !e.settled(op) {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			e.meter.Waited(WaitDeadline)
			return op, nil
		}
		changed, unsubscribe := e.ledger.Changes().Subscribe(op.ID)
		// Read after subscribing, so a change committed in between is not missed; waiters
		// of the same operation share the read. While another process may change the
		// operation, the first read marks it watched, so that its changes notify this
		// process's listener (changes made here wake the waiter in any case).
		var fresh *models.Operation
		var err error
		if !watching && !e.holds(op) {
			fresh, err = e.ledger.Watch(ctx, op.Tenant, op.ID)
			watching = true
		} else {
			fresh, err = e.reads.get(ctx, op.Tenant, op.ID, time.Now())
		}
		if err != nil {
			unsubscribe()
			return nil, err
		}
		op = fresh
		if e.settled(op) {
			unsubscribe()
			break
		}
		// ±20 % jitter, so waiters that began together do not read together.
		jittered := poll*4/5 + time.Duration(rand.Int64N(int64(poll*2/5)+1))
		timer := time.NewTimer(min(jittered, remaining))
		select {
		case <-changed:
			woke = WaitNotified
		case <-timer.C:
			woke = WaitPolled
			poll = min(poll*2, maxPollInterval)
		case <-ctx.Done():
		}
		timer.Stop()
		unsubscribe()
		if ctx.Err() != nil {
			e.meter.Waited(WaitCancelled)
			return op, nil
		}
	}
	e.meter.Waited(woke)
	return op, nil
}

// holds reports whether this process holds op's lease: its attempt is running here, and only
// this process can record its outcome (or lose the lease, which the next poll finds).
func (e *Executor) holds(op *models.Operation) bool {
	return op.State == models.StateRunning && op.LeaseOwner != nil && *op.LeaseOwner == e.worker
}

// settled reports whether waiting longer cannot change op: it is terminal, or only people can
// move it on.
func (e *Executor) settled(op *models.Operation) bool {
	switch op.State {
	case models.StateSucceeded, models.StateFailedFinal, models.StateAwaitingApproval:
		return true
	case models.StateUnknown:
		tool, ok := e.catalog.Get(op.Tool)
		return !ok || tool.Reconcile == nil
	}
	return false
}

// maskedJustification is the agent's reason with every sensitive value of the call masked, as
// an echo from the downstream is: a model may well quote the card number it was given.
func maskedJustification(tool *catalog.Tool, params []byte, text string) string {
	if text == "" || len(tool.SensitiveParams) == 0 {
		return text
	}
	v, err := decodeObject(params)
	if err != nil {
		return catalog.Masked // params that cannot be read: say nothing of them
	}
	return tool.Secrets(v).Text(text)
}
