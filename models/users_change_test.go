package models_test

import (
	"context"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChangeUser(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		l := testdb.Ledger(t, d)
		cli := models.Requester{Actor: models.ActorCLI}
		for _, name := range []string{"acme", "globex"} {
			_, err := l.CreateTenant(ctx, models.AllTenants(), cli, name)
			require.NoError(t, err)
		}
		rita, err := l.CreateUser(ctx, models.AllTenants(), cli, models.NewUser{Email: "rita@example.com", Password: goodPassword, Role: models.RoleReviewer, Tenants: []string{"acme"}})
		require.NoError(t, err)
		gus, err := l.CreateUser(ctx, models.AllTenants(), cli, models.NewUser{Email: "gus@example.com", Password: goodPassword, Role: models.RoleReviewer, Tenants: []string{"globex"}})
		require.NoError(t, err)
		tina := models.Requester{Actor: "user:tina@example.com"}
		acme := models.OnlyTenants("acme")
		head := func() int64 { seq, _, err := l.AuditHead(ctx); require.NoError(t, err); return seq }

		u, err := l.ChangeUser(ctx, acme, tina, rita.ID, models.UserChange{Role: models.RoleAuditor})
		require.NoError(t, err)
		assert.Equal(t, models.RoleAuditor, u.Role)

		token, _, err := l.StartSession(ctx, rita.ID)
		require.NoError(t, err)
		_, err = l.ChangeUser(ctx, acme, tina, rita.ID, models.UserChange{Password: "a brand new passphrase"})
		require.NoError(t, err)
		_, _, err = l.SessionUser(ctx, token)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "a new password ends the sessions")
		yes := true
		u, err = l.ChangeUser(ctx, acme, tina, rita.ID, models.UserChange{Disable: &yes})
		require.NoError(t, err)
		assert.NotNil(t, u.DisabledAt)

		before := head()
		_, err = l.ChangeUser(ctx, acme, tina, gus.ID, models.UserChange{Disable: &yes})
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "another tenant's user is not found")
		_, err = l.ChangeUser(ctx, models.Scope{}, tina, rita.ID, models.UserChange{Role: models.RoleAdmin})
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "the zero scope reaches nobody")
		_, err = l.ChangeUser(ctx, acme, tina, rita.ID, models.UserChange{Password: "short"})
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err))
		_, err = l.ChangeUser(ctx, models.AllTenants(), models.Requester{Actor: "user:rita@example.com"}, rita.ID, models.UserChange{Role: models.RoleAdmin})
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), "nobody changes their own role")
		assert.Equal(t, before, head(), "refused changes write no entry")
		g, err := l.UserByID(ctx, gus.ID)
		require.NoError(t, err)
		assert.Nil(t, g.DisabledAt)
	})
}
