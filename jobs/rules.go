package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/catalog/rules"
	"github.com/idemgate/idemgate/models"
)

// The tools file's policies and budgets (docs/POLICY.md) decide a call when its key is new, in
// the transaction that records it: a replay answers what was recorded, whatever they say now.

// policyFor evaluates the policies and budgets on req and returns what to record with the new
// operation (nil when none applies), or the refusal of a deny rule. A deny of a key already
// recorded is no refusal: its request is a replay, answered from its row.
func (e *Executor) policyFor(ctx context.Context, req SubmitRequest) (*models.PolicyDecision, error) {
	set := e.catalog.Rules()
	if !set.Applies(req.Tool.Name) {
		return nil, nil
	}
	params, err := rules.Params(req.Params, req.Tool.ParamsSchemaRaw)
	if err != nil {
		return nil, err
	}
	now := e.now()
	o := set.Evaluate(rules.Call{Tool: req.Tool.Name, Params: params, Principal: req.Caller.PrincipalName, Tenant: req.Caller.Tenant,
		Justification: req.Justification, Now: now})
	e.meter.PolicyDecided(o.Rule, string(o.Decision))
	if o.Err != nil {
		e.log.Warn("policy evaluation failed: the call is denied", "rule", o.Failed, "tool", req.Tool.Name, "err", o.Err)
	}
	if o.Rule == "" && len(o.Charges) == 0 {
		return nil, nil
	}
	if o.Decision == rules.Deny {
		if _, err := e.ledger.GetByKey(ctx, req.Caller.Tenant, req.Key); err == nil {
			return nil, nil // a replay: Submit answers what was recorded
		} else if models.ErrorCode(err) != models.CodeNotFound {
			return nil, err
		}
		return nil, models.DenyByPolicy(o.Rule, o.Reason)
	}
	p := &models.PolicyDecision{Rule: o.Rule, Decision: string(o.Decision), Reason: o.Reason, Approvals: o.Approvals}
	for _, c := range o.Charges {
		p.Budgets = append(p.Budgets, models.BudgetUse{Name: c.Budget, Scope: c.Scope, Amount: c.Amount, Limit: c.Limit,
			Since: c.Since(now), Over: string(c.Over),
			Reason: fmt.Sprintf("The budget %s would pass its limit of %d for %s.", c.Budget, c.Limit, c.Scope)})
	}
	return p, nil
}

// auditDenied records a call a policy refused: who, which tool and key, the rule, the params
// masked. It is written apart from any operation, since none was recorded.
func (e *Executor) auditDenied(ctx context.Context, req SubmitRequest, denied *models.PolicyDenied) {
	var params any
	masked, _ := req.Tool.MaskJSON(req.Params)
	_ = json.Unmarshal(masked, &params)
	_, err := e.ledger.Audit(ctx, models.AuditInput{Actor: req.Caller.Actor(), Action: models.AuditPolicyDenied, Tenant: req.Caller.Tenant,
		Outcome: models.OutcomeRefused, Detail: map[string]any{"tool": req.Tool.Name, "key": req.Key, "rule": denied.Rule,
			"reason": denied.Reason, "params": params}})
	if err != nil {
		e.log.Warn("the audit entry of a policy refusal could not be written", "err", err)
	}
}

// recheckApproved checks an operation reviewers approved against the policy and the key as they
// are now, before its attempt sends anything (docs/POLICY.md): a key revoked or no longer
// allowed the tool, or a deny rule that now matches, ends it FAILED_FINAL without running. An
// approval is no licence for an action whose permissions have since changed. It returns nil when
// the attempt may go ahead.
func (e *Executor) recheckApproved(ctx context.Context, tool *catalog.Tool, c models.Claimed) (*models.AttemptOutcome, error) {
	caller, err := e.ledger.ApprovedCaller(ctx, c.Op)
	if err != nil || caller == nil {
		return nil, err
	}
	refuse := func(class, msg string) *models.AttemptOutcome {
		return &models.AttemptOutcome{Class: string(Rejected), To: models.StateFailedFinal, ErrorClass: class, ErrorMessage: msg}
	}
	if caller.Key.RevokedAt != nil || !caller.AllowsTool(tool.Name) {
		return refuse(models.ErrorPermissionRevoked, "the API key that submitted this operation may no longer use "+tool.Name+
			" (revoked, or the tool taken off its list) since reviewers approved it; nothing was sent"), nil
	}
	set := e.catalog.Rules()
	if !set.Applies(tool.Name) {
		return nil, nil
	}
	raw, err := e.ledger.Params(c.Op)
	if err != nil {
		return nil, err
	}
	params, err := rules.Params(raw, tool.ParamsSchemaRaw)
	if err != nil {
		return nil, err
	}
	justification := ""
	if c.Op.Justification != nil {
		justification = *c.Op.Justification
	}
	o := set.Evaluate(rules.Call{Tool: tool.Name, Params: params, Principal: caller.PrincipalName, Tenant: caller.Tenant,
		Justification: justification, Now: e.now()})
	// Only a rule's deny ends it: its budgets were charged when it was recorded, and reviewers
	// approved what they held.
	if o.Decision == rules.Deny && o.Rule != "" {
		return refuse(models.ErrorPolicyDenied, fmt.Sprintf("the policy %s now denies this call (%s); reviewers approved it before, but nothing was sent",
			o.Rule, o.Reason)), nil
	}
	return nil, nil
}

// BudgetMeter receives each budget's highest usage ratio (idemgate_budget_usage_ratio).
type BudgetMeter interface {
	BudgetUsage(budget string, ratio float64)
}

// WatchBudgets sets, every interval until ctx ends, each budget's highest scope value's usage
// over its limit (the tenant's own limit where it has one): the gauge an alert watches before
// agents start waiting for people. Scope values never become labels.
func WatchBudgets(ctx context.Context, l *models.Ledger, set *rules.Set, meter BudgetMeter, every time.Duration, log *slog.Logger) {
	budgets := set.Budgets()
	if len(budgets) == 0 {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		limits, err := l.BudgetLimits(ctx, models.AllTenants(), "")
		if err == nil {
			for _, b := range budgets {
				top, err := l.BudgetHighest(ctx, b.Name, b.Since(time.Now()), 20)
				if err != nil {
					log.Warn("budget usage not read", "budget", b.Name, "err", err)
					continue
				}
				ratio := 0.0
				for _, u := range top {
					limit := b.Limit
					for _, own := range limits {
						if own.Tenant == u.Tenant && own.Budget == b.Name {
							limit = own.LimitAmount
						}
					}
					if limit > 0 {
						ratio = max(ratio, float64(u.Used)/float64(limit))
					}
				}
				meter.BudgetUsage(b.Name, ratio)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
