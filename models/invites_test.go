package models_test

import (
	"context"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An outstanding invite ends when an admin sets the account's password, disables it, or enables
// it again (issue 47, finding 5): before, a link sent to the wrong address still set the
// password of an account an admin had since secured. A fresh invite still works. Both engines.
func TestInviteEndsWhenCredentialsOrStatusChange(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		l := models.New(models.Config{DB: testdb.Open(t, d), Dialect: d})
		cli := models.Requester{Actor: models.ActorCLI}
		_, err := l.CreateTenant(ctx, models.AllTenants(), cli, "acme")
		require.NoError(t, err)
		invite := func(email string) (*models.User, string) {
			u, token, err := l.InviteUser(ctx, models.AllTenants(), cli, models.NewUser{Email: email, Role: models.RoleReviewer, Tenants: []string{"acme"}})
			require.NoError(t, err)
			_, err = l.InviteFor(ctx, token)
			require.NoError(t, err, "a new invite works")
			return u, token
		}
		yes, no := true, false

		u, token := invite("nina@example.com")
		_, err = l.ChangeUser(ctx, models.AllTenants(), cli, u.ID, models.UserChange{Password: "an admin set this password"})
		require.NoError(t, err)
		_, err = l.AcceptInvite(ctx, token, "the invitee's own password")
		assert.Error(t, err, "a password set by an admin ends the invite")

		u, token = invite("omar@example.com")
		_, err = l.ChangeUser(ctx, models.AllTenants(), cli, u.ID, models.UserChange{Disable: &yes})
		require.NoError(t, err)
		_, err = l.ChangeUser(ctx, models.AllTenants(), cli, u.ID, models.UserChange{Disable: &no})
		require.NoError(t, err)
		_, err = l.InviteFor(ctx, token)
		assert.Error(t, err, "a disable and re-enable ends the invite")
		_, err = l.AcceptInvite(ctx, token, "the invitee's own password")
		assert.Error(t, err)

		_, token = invite("pia@example.com")
		_, err = l.AcceptInvite(ctx, token, "the invitee's own password")
		assert.NoError(t, err, "an untouched invite still works once")
	})
}
