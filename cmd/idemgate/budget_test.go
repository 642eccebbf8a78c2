package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
)

const budgetToolsFile = `
tools:
  - name: refunds.issue
    description: Refund an order
    effect: write
    params_schema:
      type: object
      required: [amount_cents]
      properties:
        amount_cents: {type: integer}
    http: {url: "https://payments.example.com/refunds", timeout: 5s, idempotency_header: Idempotency-Key}
budgets:
  - name: refunds-per-agent
    tools: [refunds.issue]
    per: [principal]
    amount: params.amount_cents
    limit: 200000
    window: 24h
`

// TestBudgetCommands: budget set gives a tenant a limit of its own (audited), list shows it
// beside the file's, unset returns to the file's; a budget the file lacks and a tenant that does
// not exist are refused. Both engines.
func TestBudgetCommands(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		dsn := testdb.DSN(t, d)
		tools := filepath.Join(t.TempDir(), "tools.yaml")
		require.NoError(t, os.WriteFile(tools, []byte(budgetToolsFile), 0o600))
		require.NoError(t, runCommand(t, dsn, "migrate").err)
		require.NoError(t, runCommand(t, dsn, "tenant", "create", "acme").err)
		require.NoError(t, runCommand(t, dsn, "tenant", "create", "globex").err)

		r := runCommand(t, dsn, "budget", "set", "--tools", tools, "--tenant", "acme", "refunds-per-agent", "5000")
		require.NoError(t, r.err)
		assert.Contains(t, r.stdout, "limit 5000")
		require.Error(t, runCommand(t, dsn, "budget", "set", "--tools", tools, "--tenant", "acme", "refunds-per-agnt", "5000").err, "a typo")
		require.Error(t, runCommand(t, dsn, "budget", "set", "--tools", tools, "--tenant", "nobody", "refunds-per-agent", "5000").err)
		require.Error(t, runCommand(t, dsn, "budget", "set", "--tools", tools, "--tenant", "acme", "refunds-per-agent", "-1").err)

		r = runCommand(t, dsn, "budget", "list", "--tools", tools)
		require.NoError(t, r.err)
		assert.Regexp(t, `refunds-per-agent\s+acme\s+5000 \(tenant's\)\s+24h0m0s`, r.stdout)
		assert.Regexp(t, `refunds-per-agent\s+globex\s+200000\s+24h0m0s`, r.stdout)

		require.NoError(t, runCommand(t, dsn, "budget", "unset", "--tools", tools, "--tenant", "acme", "refunds-per-agent").err)
		r = runCommand(t, dsn, "budget", "list", "--tools", tools, "--tenant", "acme")
		require.NoError(t, r.err)
		assert.Regexp(t, `refunds-per-agent\s+acme\s+200000\s`, r.stdout)
		require.Error(t, runCommand(t, dsn, "budget", "unset", "--tools", tools, "--tenant", "acme", "refunds-per-agent").err, "nothing left to unset")

		r = runCommand(t, dsn, "audit", "export")
		require.NoError(t, r.err)
		assert.Contains(t, r.stdout, `budget.set`)
		assert.Contains(t, r.stdout, `budget.unset`)
	})
}
