package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every administrative change made with the command line is in the audit log, with actor cli.
func TestAdminCommandsAreAudited(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		dsn := migratedDSN(t, d)
		var prefix string
		cases := []struct {
			name   string
			stdin  string
			args   func() []string
			action string
			tenant string
			detail map[string]any
		}{
			{"tenant create", "", func() []string { return []string{"tenant", "create", "acme"} }, models.AuditTenantCreate, "acme", nil},
			{"apikey create", "", func() []string {
				return []string{"apikey", "create", "--tenant", "acme", "--principal", "billing-agent", "--tools", "refunds.issue"}
			}, models.AuditAPIKeyCreate, "acme", map[string]any{"principal": "billing-agent", "tools": "refunds.issue"}},
			{"apikey revoke", "", func() []string { return []string{"apikey", "revoke", prefix} }, models.AuditAPIKeyRevoke, "acme", nil},
			{"user create", "correct horse battery\n", func() []string {
				return []string{"user", "create", "--email", "Rita@Example.com", "--role", "reviewer", "--tenants", "acme"}
			}, models.AuditUserCreate, "acme", map[string]any{"email": "rita@example.com", "role": "reviewer", "tenants": "acme"}},
		}
		for _, tc := range cases {
			out, _, err := runUserCommand(t, dsn, tc.stdin, tc.args()...)
			require.NoError(t, err, tc.name)
			if tc.action == models.AuditAPIKeyCreate {
				lines := strings.Split(strings.TrimSpace(out), "\n")
				prefix = lines[len(lines)-1][:models.APIKeyPrefixLen]
			}
			e := lastAuditEntry(t, dsn, d)
			assert.Equal(t, models.ActorCLI, e.Actor, tc.name)
			assert.Equal(t, tc.action, e.Action, tc.name)
			assert.Equal(t, tc.tenant, e.Tenant, tc.name)
			assert.Equal(t, models.OutcomeOK, e.Outcome, tc.name)
			var detail map[string]any
			if e.Detail != "" {
				require.NoError(t, json.Unmarshal([]byte(e.Detail), &detail))
			}
			for k, want := range tc.detail {
				assert.Equal(t, want, detail[k], "%s: detail %s", tc.name, k)
			}
			assert.NotContains(t, e.Detail, "correct horse battery", "never the password")
		}
		_, _, err := runUserCommand(t, dsn, "", "audit", "verify")
		require.NoError(t, err, "the entries form one unbroken chain")
	})
}

// lastAuditEntry returns the newest entry of the audit log at dsn.
func lastAuditEntry(t *testing.T, dsn string, d models.Dialect) models.AuditEntry {
	t.Helper()
	db, _, err := models.Open(t.Context(), dsn)
	require.NoError(t, err)
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	entries, _, err := models.New(models.Config{DB: db, Dialect: d}).AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Limit: 1})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	return entries[0]
}
