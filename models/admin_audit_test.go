package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// refuseAuditInserts makes every insert into the audit log fail, as a full disk or a revoked
// grant would, until the returned function is called.
func refuseAuditInserts(t *testing.T, d models.Dialect, db *gorm.DB) func() {
	t.Helper()
	if d == models.SQLite {
		require.NoError(t, db.Exec(`CREATE TRIGGER audit_refuses BEFORE INSERT ON audit_log
			BEGIN SELECT RAISE(ABORT, 'the audit log refuses entries'); END`).Error)
		return func() { require.NoError(t, db.Exec(`DROP TRIGGER audit_refuses`).Error) }
	}
	require.NoError(t, db.Exec(`CREATE FUNCTION audit_refuses() RETURNS trigger AS $$
		BEGIN RAISE EXCEPTION 'the audit log refuses entries'; END $$ LANGUAGE plpgsql`).Error)
	require.NoError(t, db.Exec(`CREATE TRIGGER audit_refuses BEFORE INSERT ON audit_log
		FOR EACH ROW EXECUTE FUNCTION audit_refuses()`).Error)
	return func() { require.NoError(t, db.Exec(`DROP TRIGGER audit_refuses ON audit_log`).Error) }
}

// An admin change and its audit entry commit together: when the entry cannot be written, the
// change is rolled back too; once it can, each change writes exactly one entry.
func TestAdminChangesCommitWithTheirAuditEntry(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		db := testdb.Open(t, d)
		l := models.New(models.Config{DB: db, Dialect: d})
		all := models.AllTenants()
		_, err := l.CreateTenant(ctx, all, admin, "acme")
		require.NoError(t, err)
		key, err := l.CreateAPIKey(ctx, all, admin, "acme", "agent", nil)
		require.NoError(t, err)
		caller, err := l.Authenticate(ctx, key.Secret)
		require.NoError(t, err)
		original := succeededOperation(t, l, caller)
		entries := func() int {
			es, _, err := l.AuditEntries(ctx, all, models.AuditSearch{Limit: 500})
			require.NoError(t, err)
			return len(es)
		}
		before := entries()
		proposal := models.NewOperation{Tenant: "acme", PrincipalID: "user:rita@example.com", Key: "compensate:" + original.ID,
			Tool: "tickets.close", Fingerprint: "sha256:close", Params: []byte(`{}`), Compensates: original.ID,
			NeedsApproval: true, ReviewReason: models.ReasonCompensationApproval, Actor: "user:rita@example.com",
			Audit: func(op *models.Operation) models.AuditInput {
				return models.AuditInput{Actor: "user:rita@example.com", Action: models.AuditProposeCompensation,
					Tenant: op.Tenant, OperationID: original.ID, Outcome: models.OutcomeOK}
			}}
		changes := []struct {
			name  string
			do    func() error
			taken func() bool // whether the change is in the ledger
		}{
			{"tenant", func() error { _, err := l.CreateTenant(ctx, all, admin, "initech"); return err }, func() bool {
				ts, err := l.ScopedTenants(ctx, all)
				require.NoError(t, err)
				return len(ts) == 2
			}},
			{"api key", func() error { _, err := l.CreateAPIKey(ctx, all, admin, "acme", "agent-2", nil); return err }, func() bool {
				ks, err := l.APIKeys(ctx, all, "")
				require.NoError(t, err)
				return len(ks) == 2
			}},
			{"api key revoked", func() error { _, err := l.RevokeAPIKeyByID(ctx, all, admin, key.Key.ID); return err }, func() bool {
				_, err := l.Authenticate(ctx, key.Secret)
				return models.ErrorCode(err) == models.CodeNotFound
			}},
			{"user", func() error {
				_, err := l.CreateUser(ctx, all, admin, models.NewUser{Email: "rita@example.com", Password: goodPassword, Role: models.RoleReviewer})
				return err
			}, func() bool {
				_, err := l.UserByEmail(ctx, "rita@example.com")
				return err == nil
			}},
			{"compensation proposal", func() error { _, err := l.Submit(ctx, proposal); return err }, func() bool {
				op, err := l.Get(ctx, "acme", original.ID)
				require.NoError(t, err)
				_, byKey := l.GetByKey(ctx, "acme", proposal.Key)
				return op.CompensatedBy != nil || byKey == nil
			}},
		}

		restore := refuseAuditInserts(t, d, db)
		for _, c := range changes {
			require.Error(t, c.do(), "%s: the change fails with its entry", c.name)
			assert.False(t, c.taken(), "%s: rolled back with its entry", c.name)
		}
		assert.Equal(t, before, entries())

		restore()
		for i, c := range changes {
			require.NoError(t, c.do(), c.name)
			assert.True(t, c.taken(), c.name)
			assert.Equal(t, before+i+1, entries(), "%s: one entry", c.name)
		}
		_, _, err = l.VerifyAudit(ctx)
		require.NoError(t, err)
	})
}

// succeededOperation records an operation of c that succeeded.
func succeededOperation(t *testing.T, l *models.Ledger, c *models.Caller) *models.Operation {
	t.Helper()
	in := newOp(c, "to-compensate")
	in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
	s, err := l.Submit(context.Background(), in)
	require.NoError(t, err)
	require.NoError(t, l.FinishAttempt(context.Background(), models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", succeeded))
	return s.Op
}
