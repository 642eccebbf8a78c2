package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
)

// The budgets page shows each budget of the tools file per tenant with what is counted now and
// what the policies refused; an admin sets a tenant's own limit through its form (audited) and
// removes it with an empty limit. Both engines.
func TestConsoleBudgets(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		con := consoletest.Start(t, d, consoletest.Options{Policies: `
budgets:
  - name: refunds-per-agent
    tools: [refunds.issue]
    per: [principal]
    amount: params.amount_cents
    limit: 200000
    window: 24h
`})
		con.Tenant(t, "acme")
		b := con.NewBrowser(t)
		b.MustLogin(t, "ada@example.com", con.User(t, "ada@example.com", models.RoleAdmin))
		p := b.Get(t, "/admin/budgets")
		require.Equal(t, http.StatusOK, p.Status)
		assert.Len(t, p.TestIDs("budget-row"), 1)
		assert.Contains(t, strings.Join(p.TestIDs("budget-activity"), " "), "refused 0 calls")

		r := b.Post(t, "/admin/budgets", url.Values{"budget": {"refunds-per-agent"}, "tenant": {"acme"}, "limit": {"5000"}})
		require.Equal(t, http.StatusSeeOther, r.Status, r.Body)
		p = b.Get(t, "/admin/budgets")
		assert.Contains(t, strings.Join(p.TestIDs("notice"), " "), "is now 5000")
		assert.Contains(t, p.Body, "the tenant's own")
		limits, err := con.Ledger.BudgetLimits(t.Context(), models.AllTenants(), "acme")
		require.NoError(t, err)
		require.Len(t, limits, 1)
		assert.Equal(t, int64(5000), limits[0].LimitAmount)
		entries, _, err := con.Ledger.AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Action: models.AuditBudgetSet, Limit: 5})
		require.NoError(t, err)
		require.Len(t, entries, 1)
		assert.Equal(t, "user:ada@example.com", entries[0].Actor)

		r = b.Post(t, "/admin/budgets", url.Values{"budget": {"refunds-per-agent"}, "tenant": {"acme"}, "limit": {""}})
		require.Equal(t, http.StatusSeeOther, r.Status)
		limits, err = con.Ledger.BudgetLimits(t.Context(), models.AllTenants(), "acme")
		require.NoError(t, err)
		assert.Empty(t, limits, "an empty limit returns to the file's")
		r = b.Post(t, "/admin/budgets", url.Values{"budget": {"nope"}, "tenant": {"acme"}, "limit": {"1"}})
		require.Equal(t, http.StatusSeeOther, r.Status)
		assert.Contains(t, strings.Join(b.Get(t, "/admin/budgets").TestIDs("notice"), " "), "declares no budget")
	})
}
