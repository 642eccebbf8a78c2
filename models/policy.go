package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Policy on arguments and budgets (docs/POLICY.md). The rules are evaluated by the gateway
// before a new operation is recorded; what they decided travels with the operation in
// NewOperation.Policy. The budgets are charged here, in the transaction that records the
// operation, so that the amounts counted against one scope value never pass its limit without a
// person's approval, however many requests and replicas race.
//
// How a budget is counted, and why it is exact: budget_counters.go (a counter per scope value
// that the database keeps with every charge and every change of state) and policy_batch.go
// (how a batch of new operations is decided against the counters).

// CodePolicyDenied: a policy rule or a budget denies the call (403 policy-denied). Nothing was
// recorded, so the key may be used again once the policy allows it.
const CodePolicyDenied Code = "policy_denied"

// Decisions of a policy, the strictest winning: deny over require_approval over allow.
const (
	PolicyAllow           = "allow"
	PolicyRequireApproval = "require_approval"
	PolicyDeny            = "deny"
)

// ReasonPolicy is the review reason of an operation a policy rule or a budget holds for a person.
const ReasonPolicy = "policy"

// EventPolicyDecided records what the rules and budgets decided of a new operation.
const EventPolicyDecided = "policy_decided"

// AuditPolicyDenied is the audit entry of a call a policy refused.
const AuditPolicyDenied = "policy.denied"

// PolicyDecision is what the policies and budgets decided of a new operation (the operation
// object's `policy` member).
type PolicyDecision struct {
	Rule     string      `json:"rule"`
	Decision string      `json:"decision"`
	Reason   string      `json:"reason"`
	Budgets  []BudgetUse `json:"budgets"`
	// Approvals is the rule's own count of distinct reviewers for require_approval (its
	// `approvals`), replacing the tool's review.approvals; 0 for the tool's.
	Approvals int `json:"approvals,omitempty"`
}

// BudgetUse is one budget charged for an operation: its amount against its scope value, what
// was counted before it, the limit, and what the budget decided.
type BudgetUse struct {
	Name     string `json:"name"`
	Scope    string `json:"scope"`
	Amount   int64  `json:"amount"`
	Used     int64  `json:"used"`
	Limit    int64  `json:"limit"`
	Decision string `json:"decision"`
	// Since is when the budget's window began; Over what passing the limit decides.
	Since time.Time `json:"-"`
	Over  string    `json:"-"`
	// Reason says what passing the limit means, for the agent and the reviewers.
	Reason string `json:"-"`
	// fileLimit is the tools file's limit, kept by the first decision: a tenant's own limit
	// replaces Limit, and a member decided again (a batch's, alone) starts from the file's.
	fileLimit *int64
}

// PolicyDenied is the refusal of a call by a rule or a budget (CodePolicyDenied's cause).
type PolicyDenied struct {
	Rule   string
	Reason string
}

func (e *PolicyDenied) Error() string { return fmt.Sprintf("policy %s: %s", e.Rule, e.Reason) }

// DenyByPolicy is the error of a call that rule refuses, for reason.
func DenyByPolicy(rule, reason string) error {
	return &Error{Code: CodePolicyDenied, Message: reason, Err: &PolicyDenied{Rule: rule, Reason: reason}}
}

// PolicyDenial returns the rule and reason of a policy refusal, if err is one.
func PolicyDenial(err error) (*PolicyDenied, bool) {
	var d *PolicyDenied
	return d, errors.As(err, &d)
}

func rankOf(d string) int {
	switch d {
	case PolicyDeny:
		return 2
	case PolicyRequireApproval:
		return 1
	}
	return 0
}

// stricter is the stricter of two decisions.
func stricter(a, b string) string {
	if rankOf(b) > rankOf(a) {
		return b
	}
	return a
}

// policySchema is migration step 28's: what a policy decided of each operation it applied to,
// the budgets' charges, and a row per budget scope value to lock while charging it.
const policySchema = `
CREATE TABLE operation_policies (
	operation_id TEXT PRIMARY KEY REFERENCES operations(id),
	tenant       TEXT NOT NULL,
	decision     TEXT NOT NULL,
	created_at   {{ts}} NOT NULL
);
CREATE TABLE budget_charges (
	operation_id TEXT NOT NULL REFERENCES operations(id),
	tenant       TEXT NOT NULL,
	budget       TEXT NOT NULL,
	scope        TEXT NOT NULL,
	amount       BIGINT NOT NULL,
	created_at   {{ts}} NOT NULL,
	PRIMARY KEY (operation_id, budget)
);
CREATE INDEX budget_charges_scope ON budget_charges (tenant, budget, scope, created_at);
CREATE TABLE budget_locks (
	tenant TEXT NOT NULL,
	budget TEXT NOT NULL,
	scope  TEXT NOT NULL,
	PRIMARY KEY (tenant, budget, scope)
);
CREATE TABLE budget_limits (
	tenant       TEXT NOT NULL REFERENCES tenants(name),
	budget       TEXT NOT NULL,
	limit_amount BIGINT NOT NULL,
	set_at       {{ts}} NOT NULL,
	set_by       TEXT NOT NULL,
	PRIMARY KEY (tenant, budget)
);
`

// operationPolicy is a row of operation_policies.
type operationPolicy struct {
	OperationID string `gorm:"primaryKey"`
	Tenant      string
	Decision    string
	CreatedAt   time.Time
}

func (operationPolicy) TableName() string { return "operation_policies" }

// budgetCharge is a row of budget_charges.
type budgetCharge struct {
	OperationID string `gorm:"primaryKey"`
	Tenant      string
	Budget      string `gorm:"primaryKey"`
	Scope       string
	Amount      int64
	CreatedAt   time.Time
}

func (budgetCharge) TableName() string { return "budget_charges" }

// countingStates are the states in which an operation's charge counts against its budget.
var countingStates = []State{StatePending, StateRunning, StateUnknown, StateSucceeded}

// BudgetUsage is what is counted now against one scope value of a budget since the window began.
func (l *Ledger) BudgetUsage(ctx context.Context, tenant, budget, scope string, since time.Time) (int64, error) {
	used, err := budgetUsed(l.scope(ctx), tenant, budget, scope, since)
	if err != nil {
		return 0, unavailable("read budget usage", err)
	}
	return used, nil
}

func budgetUsed(tx *gorm.DB, tenant, budget, scope string, since time.Time) (int64, error) {
	var used int64
	err := tx.Raw("SELECT COALESCE(SUM(c.amount), 0) FROM budget_charges c JOIN operations o ON o.id = c.operation_id "+
		"WHERE c.tenant = ? AND c.budget = ? AND c.scope = ? AND c.created_at >= ? AND o.state IN ?",
		tenant, budget, scope, since, countingStates).Scan(&used).Error
	return used, err
}

// chargeBudgets locks the counter of each budget scope of p, reads what is counted, and decides
// each budget: allow while the amount fits, the budget's over when it would pass the limit. It
// returns the decision of the whole, the strictest of the rule's and the budgets'. Counters are
// locked in one order (counterKey's), the same for every transaction and batch, so that two
// operations charging the same two budgets cannot deadlock. The charge itself is counted when
// recordPolicy inserts it (budget_counters.go).
func (l *Ledger) chargeBudgets(tx *gorm.DB, tenant string, p *PolicyDecision) (string, error) {
	var w counterWindows
	for i := range p.Budgets {
		w.add(tenant, &p.Budgets[i])
	}
	counters, err := l.lockCounters(tx, &w)
	if err != nil {
		return "", err
	}
	return decideBudgets(tenant, p, counters, nil), nil
}

// recordPolicy writes, in tx, what p decided of op and the charges of its budgets.
func (l *Ledger) recordPolicy(tx *gorm.DB, now time.Time, op *Operation, p *PolicyDecision, actor string) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := tx.Create(&operationPolicy{OperationID: op.ID, Tenant: op.Tenant, Decision: string(b), CreatedAt: now}).Error; err != nil {
		return err
	}
	for _, u := range p.Budgets {
		if err := tx.Create(&budgetCharge{OperationID: op.ID, Tenant: op.Tenant, Budget: u.Name, Scope: u.Scope, Amount: u.Amount, CreatedAt: now}).Error; err != nil {
			return err
		}
	}
	return l.appendEvent(tx, now, eventInput{op: op, typ: EventPolicyDecided, actor: actor, rawDetail: b})
}

// PolicyOf returns what the policies and budgets decided of operation id, nil when none applied.
func (l *Ledger) PolicyOf(ctx context.Context, id string) (*PolicyDecision, error) {
	var row operationPolicy
	err := l.scope(ctx).Where("operation_id = ?", id).Take(&row).Error
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("read policy decision", err)
	}
	var p PolicyDecision
	if err := json.Unmarshal([]byte(row.Decision), &p); err != nil {
		return nil, fmt.Errorf("ledger: policy decision of %s: %w", id, err)
	}
	return &p, nil
}

// ApprovedCaller returns, for an operation that reviewers approved (its review asked for an
// approval, for the tool or for a policy, and is resolved), its caller as the ledger knows them
// now: the principal's name and the API key, with its tool list and whether it was revoked.
// It is nil for an operation that was never held for approval.
func (l *Ledger) ApprovedCaller(ctx context.Context, op *Operation) (*Caller, error) {
	if op.ReviewID == nil {
		return nil, nil
	}
	var review Review
	err := l.scope(ctx).Where("id = ?", *op.ReviewID).Take(&review).Error
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("read review", err)
	}
	if review.Status != ReviewResolved || (review.Reason != ReasonApprovalRequired && review.Reason != ReasonPolicy) {
		return nil, nil
	}
	// Keys and principals are revoked, never deleted: one that is missing is an operation
	// recorded outside the API (a test's seed), with no key whose rights could have changed.
	c := &Caller{Tenant: op.Tenant, PrincipalID: op.PrincipalID, Key: APIKey{ID: op.APIKeyID, Tools: "*"}}
	if err := l.scope(ctx).Where("id = ?", op.APIKeyID).Take(&c.Key).Error; err != nil && !notFound(err) {
		return nil, unavailable("read api key", err)
	}
	var principal Principal
	if err := l.scope(ctx).Where("id = ?", op.PrincipalID).Take(&principal).Error; err == nil {
		c.PrincipalName = principal.Name
	} else if !notFound(err) {
		return nil, unavailable("read principal", err)
	}
	return c, nil
}

// Audit actions of budget limits.
const (
	AuditBudgetSet   = "budget.set"
	AuditBudgetUnset = "budget.unset"
)

// BudgetLimit is a tenant's own limit of a budget, replacing the tools file's.
type BudgetLimit struct {
	Tenant      string `gorm:"primaryKey"`
	Budget      string `gorm:"primaryKey"`
	LimitAmount int64
	SetAt       time.Time
	SetBy       string
}

// TableName is the table of budget limits.
func (BudgetLimit) TableName() string { return "budget_limits" }

// SetBudgetLimit sets tenant's limit of budget, within scope s, with its audit entry. The
// caller checks that the tools file declares the budget.
func (l *Ledger) SetBudgetLimit(ctx context.Context, s Scope, by Requester, tenant, budget string, limit int64) error {
	if !s.Allows(tenant) {
		return errorf(CodeNotFound, "tenant %q does not exist", tenant)
	}
	if limit < 0 {
		return errorf(CodeInvalid, "a limit is 0 or more")
	}
	now := l.clock()
	return l.txn(ctx, "set budget limit", func(tx *gorm.DB) ([]string, error) {
		var n int64
		if err := tx.Model(&Tenant{}).Where("name = ?", tenant).Count(&n).Error; err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errorf(CodeNotFound, "tenant %q does not exist", tenant)
		}
		row := BudgetLimit{Tenant: tenant, Budget: budget, LimitAmount: limit, SetAt: now, SetBy: by.Actor}
		if err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "tenant"}, {Name: "budget"}},
			DoUpdates: clause.AssignmentColumns([]string{"limit_amount", "set_at", "set_by"})}).Create(&row).Error; err != nil {
			return nil, err
		}
		_, err := l.appendAudit(tx, now, by.entry(AuditBudgetSet, tenant, map[string]any{"budget": budget, "limit": limit}))
		return nil, err
	})
}

// UnsetBudgetLimit removes tenant's own limit of budget: the tools file's applies again.
func (l *Ledger) UnsetBudgetLimit(ctx context.Context, s Scope, by Requester, tenant, budget string) error {
	if !s.Allows(tenant) {
		return errorf(CodeNotFound, "tenant %q has no limit of its own for %q", tenant, budget)
	}
	now := l.clock()
	return l.txn(ctx, "unset budget limit", func(tx *gorm.DB) ([]string, error) {
		res := tx.Where("tenant = ? AND budget = ?", tenant, budget).Delete(&BudgetLimit{})
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected == 0 {
			return nil, errorf(CodeNotFound, "tenant %q has no limit of its own for %q", tenant, budget)
		}
		_, err := l.appendAudit(tx, now, by.entry(AuditBudgetUnset, tenant, map[string]any{"budget": budget}))
		return nil, err
	})
}

// BudgetLimits lists the tenants' own limits within scope s (of tenant, when not "").
func (l *Ledger) BudgetLimits(ctx context.Context, s Scope, tenant string) ([]BudgetLimit, error) {
	q := s.apply(l.scope(ctx), "tenant").Order("tenant, budget")
	if tenant != "" {
		q = q.Where("tenant = ?", tenant)
	}
	var out []BudgetLimit
	if err := q.Find(&out).Error; err != nil {
		return nil, unavailable("list budget limits", err)
	}
	return out, nil
}

// ScopeUsage is what is counted against one scope value of a budget.
type ScopeUsage struct {
	Scope string
	Used  int64
}

// BudgetTop lists the scope values of tenant's budget with the most counted since, highest
// first, n at most.
func (l *Ledger) BudgetTop(ctx context.Context, tenant, budget string, since time.Time, n int) ([]ScopeUsage, error) {
	var out []ScopeUsage
	err := l.scope(ctx).Raw("SELECT c.scope AS scope, SUM(c.amount) AS used FROM budget_charges c JOIN operations o ON o.id = c.operation_id "+
		"WHERE c.tenant = ? AND c.budget = ? AND c.created_at >= ? AND o.state IN ? GROUP BY c.scope ORDER BY used DESC, c.scope LIMIT ?",
		tenant, budget, since, countingStates, n).Scan(&out).Error
	if err != nil {
		return nil, unavailable("read budget usage", err)
	}
	return out, nil
}

// PrincipalScopes lists the scope values of tenant's budget that operations of principal were
// charged to since, each with what is counted against it in all (every principal's share).
func (l *Ledger) PrincipalScopes(ctx context.Context, tenant, budget, principalID string, since time.Time) ([]ScopeUsage, error) {
	var scopes []string
	err := l.scope(ctx).Raw("SELECT DISTINCT c.scope FROM budget_charges c JOIN operations o ON o.id = c.operation_id "+
		"WHERE c.tenant = ? AND c.budget = ? AND c.created_at >= ? AND o.principal_id = ? ORDER BY c.scope LIMIT 100",
		tenant, budget, since, principalID).Scan(&scopes).Error
	if err != nil {
		return nil, unavailable("read budget scopes", err)
	}
	out := make([]ScopeUsage, 0, len(scopes))
	for _, sc := range scopes {
		used, err := l.BudgetUsage(ctx, tenant, budget, sc, since)
		if err != nil {
			return nil, err
		}
		out = append(out, ScopeUsage{Scope: sc, Used: used})
	}
	return out, nil
}

// TenantScopeUsage is what is counted against one scope value of one tenant's budget.
type TenantScopeUsage struct {
	Tenant string
	Scope  string
	Used   int64
}

// BudgetHighest lists the scope values of budget, in every tenant, with the most counted since,
// highest first, n at most: for the usage gauge.
func (l *Ledger) BudgetHighest(ctx context.Context, budget string, since time.Time, n int) ([]TenantScopeUsage, error) {
	var out []TenantScopeUsage
	err := l.scope(ctx).Raw("SELECT c.tenant AS tenant, c.scope AS scope, SUM(c.amount) AS used FROM budget_charges c "+
		"JOIN operations o ON o.id = c.operation_id WHERE c.budget = ? AND c.created_at >= ? AND o.state IN ? "+
		"GROUP BY c.tenant, c.scope ORDER BY used DESC LIMIT ?", budget, since, countingStates, n).Scan(&out).Error
	if err != nil {
		return nil, unavailable("read budget usage", err)
	}
	return out, nil
}

// attachPolicy reads, in tx, what the policies decided of op into op.Policy, unless it is known:
// a payload shows the operation object as the API answers it.
func attachPolicy(tx *gorm.DB, op *Operation) error {
	if op.Policy != nil {
		return nil
	}
	var rows []operationPolicy
	if err := tx.Where("operation_id = ?", op.ID).Limit(1).Find(&rows).Error; err != nil {
		return fmt.Errorf("ledger: policy of %s: %w", op.ID, err)
	}
	if len(rows) == 0 {
		return nil
	}
	var p PolicyDecision
	if err := json.Unmarshal([]byte(rows[0].Decision), &p); err != nil {
		return fmt.Errorf("ledger: policy of %s: %w", op.ID, err)
	}
	op.Policy = &p
	return nil
}

// PolicyActivity counts, within scope s since a time, the operations a policy or budget held for
// a person when they were recorded, and the calls a policy refused (their audit entries).
func (l *Ledger) PolicyActivity(ctx context.Context, s Scope, since time.Time) (held, denied int64, err error) {
	q := s.apply(l.scope(ctx).Model(&operationPolicy{}), "tenant").Where("created_at >= ? AND decision LIKE ?", since, `%"decision":"require_approval"%`)
	if err := q.Count(&held).Error; err != nil {
		return 0, 0, unavailable("count policy holds", err)
	}
	q = s.apply(l.scope(ctx).Model(&AuditEntry{}), "tenant").Where("at >= ? AND action = ?", since, AuditPolicyDenied)
	if err := q.Count(&denied).Error; err != nil {
		return 0, 0, unavailable("count policy refusals", err)
	}
	return held, denied, nil
}

// attachPolicies reads what the policies decided of each of ops, with one IN query: an exported
// operation reads as the API answers it.
func attachPolicies(tx *gorm.DB, ops []*Operation) error {
	ids := make([]string, len(ops))
	byID := make(map[string]*Operation, len(ops))
	for i, op := range ops {
		ids[i], byID[op.ID] = op.ID, op
	}
	var rows []operationPolicy
	if err := tx.Where("operation_id IN ?", ids).Find(&rows).Error; err != nil {
		return fmt.Errorf("ledger: policies: %w", err)
	}
	for _, r := range rows {
		var p PolicyDecision
		if err := json.Unmarshal([]byte(r.Decision), &p); err != nil {
			return fmt.Errorf("ledger: policy of %s: %w", r.OperationID, err)
		}
		byID[r.OperationID].Policy = &p
	}
	return nil
}
