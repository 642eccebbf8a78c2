package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idemgate/idemgate/models"
)

// budgetJSON is one budget as an agent sees it (GET /v1/budgets): per scope value its operations
// were charged to in the window, what is counted there in all and what remains.
type budgetJSON struct {
	Name      string  `json:"name"`
	Limit     int64   `json:"limit"`
	Window    string  `json:"window,omitempty"`
	Period    string  `json:"period,omitempty"`
	Scope     *string `json:"scope"`
	Used      int64   `json:"used"`
	Remaining int64   `json:"remaining"`
}

// Budgets answers GET /v1/budgets: the budgets of the tools file that apply to a tool the
// caller's key may use, each with the tenant's limit, for the caller's own scope values (one
// entry with a null scope while it has none in the window), so an agent can see how much room
// is left before a person is asked.
func (a *API) Budgets(c echo.Context) error {
	ctx := c.Request().Context()
	caller := CallerFrom(ctx)
	set := a.Catalog.Rules()
	limits, err := a.Ledger.BudgetLimits(ctx, models.OnlyTenants(caller.Tenant), caller.Tenant)
	if err != nil {
		return err
	}
	now := time.Now()
	out := struct {
		Budgets []budgetJSON `json:"budgets"`
	}{Budgets: []budgetJSON{}}
	for _, b := range set.Budgets() {
		allowed := false
		for _, t := range set.BudgetTools(b.Name) {
			allowed = allowed || caller.AllowsTool(t)
		}
		if !allowed {
			continue
		}
		limit := b.Limit
		for _, l := range limits {
			if l.Budget == b.Name {
				limit = l.LimitAmount
			}
		}
		entry := budgetJSON{Name: b.Name, Limit: limit, Period: b.Period, Remaining: limit}
		if b.Period == "" {
			entry.Window = b.Window.String()
		}
		scopes, err := a.Ledger.PrincipalScopes(ctx, caller.Tenant, b.Name, caller.PrincipalID, b.Since(now))
		if err != nil {
			return err
		}
		if len(scopes) == 0 {
			out.Budgets = append(out.Budgets, entry)
		}
		for _, s := range scopes {
			e := entry
			e.Scope, e.Used, e.Remaining = &s.Scope, s.Used, max(limit-s.Used, 0)
			out.Budgets = append(out.Budgets, e)
		}
	}
	return c.JSON(http.StatusOK, out)
}
