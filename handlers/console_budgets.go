package handlers

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
)

// Budgets shows the tools file's budgets for the tenants within the admin's scope: each one's
// limit (the tenant's own where an admin set one), what is counted now against its highest
// scope values, and what the policies held or refused in the last 24 hours (docs/POLICY.md).
func (h *Console) Budgets(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenants, err := h.Ledger.ScopedTenants(ctx, v.Scope)
	if err != nil {
		return err
	}
	own, err := h.Ledger.BudgetLimits(ctx, v.Scope, "")
	if err != nil {
		return err
	}
	now := h.now()
	held, denied, err := h.Ledger.PolicyActivity(ctx, v.Scope, now.Add(-24*time.Hour))
	if err != nil {
		return err
	}
	names := tenantNames(tenants)
	p := views.BudgetsPage{Page: h.page(c, v, "Budgets", views.NavAdmin), Held: held, Denied: denied, Tenants: options(names, "")}
	var budgetNames []string
	for _, b := range h.Catalog.Rules().Budgets() {
		budgetNames = append(budgetNames, b.Name)
		for _, t := range names {
			row := views.BudgetView{Name: b.Name, Tenant: t, Window: b.Describe(), Limit: b.Limit}
			for _, o := range own {
				if o.Tenant == t && o.Budget == b.Name {
					row.Limit, row.OwnLimit = o.LimitAmount, true
				}
			}
			top, err := h.Ledger.BudgetTop(ctx, t, b.Name, b.Since(now), 5)
			if err != nil {
				return err
			}
			for _, u := range top {
				pct := 0
				if row.Limit > 0 {
					pct = int(u.Used * 100 / row.Limit)
				}
				row.Top = append(row.Top, views.ScopeUse{Scope: u.Scope, Used: u.Used, Percent: pct})
			}
			p.Budgets = append(p.Budgets, row)
		}
	}
	p.BudgetNames = options(budgetNames, "")
	if fl, ok := h.takeFlash(c); ok {
		p.Notice = &views.NoticeText{Kind: views.NoticeKind(fl.Kind), Message: fl.Message}
	}
	return renderPage(c, http.StatusOK, views.Budgets(p))
}

// SetBudget sets (or, with an empty limit, removes) a tenant's own limit of a budget within the
// admin's scope; the ledger writes the audit entry.
func (h *Console) SetBudget(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	budget, tenant := c.FormValue("budget"), c.FormValue("tenant")
	known := false
	for _, b := range h.Catalog.Rules().Budgets() {
		known = known || b.Name == budget
	}
	if !known {
		return h.formDone(c, &models.Error{Code: models.CodeInvalid, Message: "the tools file declares no budget " + strconv.Quote(budget)}, "", "/admin/budgets")
	}
	ctx := c.Request().Context()
	raw := strings.TrimSpace(c.FormValue("limit"))
	if raw == "" {
		err := h.Ledger.UnsetBudgetLimit(ctx, v.Scope, requester(c, v), tenant, budget)
		return h.formDone(c, err, "The tools file's limit of "+budget+" applies to "+tenant+" again.", "/admin/budgets")
	}
	limit, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || limit < 0 {
		return h.formDone(c, &models.Error{Code: models.CodeInvalid, Message: "a limit is a whole number, 0 or more"}, "", "/admin/budgets")
	}
	err = h.Ledger.SetBudgetLimit(ctx, v.Scope, requester(c, v), tenant, budget, limit)
	return h.formDone(c, err, "The limit of "+budget+" for "+tenant+" is now "+raw+", from the next operation.", "/admin/budgets")
}
