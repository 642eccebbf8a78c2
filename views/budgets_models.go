package views

// BudgetsPage is the admin page of the tools file's budgets (docs/POLICY.md): each budget, its
// limit per tenant, what is counted now against its highest scope values, and what the
// policies held or refused in the last 24 hours.
type BudgetsPage struct {
	Page
	Notice  *NoticeText
	Budgets []BudgetView
	// Tenants and BudgetNames are the choices of the form that sets a tenant's own limit.
	Tenants     []Option
	BudgetNames []Option
	// Held and Denied count the last 24 hours: operations a policy held for a person, and
	// calls a policy refused.
	Held, Denied int64
}

// BudgetView is one budget of the tools file for one tenant.
type BudgetView struct {
	Name, Tenant, Window string
	Limit                int64
	OwnLimit             bool // the tenant's own limit, set by an admin, replaces the file's
	Top                  []ScopeUse
}

// ScopeUse is what is counted against one scope value.
type ScopeUse struct {
	Scope   string
	Used    int64
	Percent int // of the limit, rounded down; over 100 when approvals allowed more
}
