package models_test

import (
	"context"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSignInFederated(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		l := testdb.Ledger(t, d)
		const issuer = "https://id.example.com"
		login := func(state string, role models.Role, tenants ...string) models.FederatedLogin {
			return models.FederatedLogin{Issuer: issuer, Subject: "sub-ann", Email: "Ann@Example.com",
				Role: role, Tenants: tenants, State: state}
		}

		u, err := l.SignInFederated(ctx, login("s1", models.RoleReviewer, "acme"))
		require.NoError(t, err)
		assert.Equal(t, "ann@example.com", u.Email)
		assert.True(t, u.Federated())
		assert.Equal(t, []string{"acme"}, u.TenantList())

		again, err := l.SignInFederated(ctx, login("s2", models.RoleAdmin, "acme", "globex"))
		require.NoError(t, err)
		assert.Equal(t, u.ID, again.ID, "the same person at the provider is the same user")
		assert.Equal(t, models.RoleAdmin, again.Role, "role follows the provider's claims")
		stored, err := l.UserByID(ctx, u.ID)
		require.NoError(t, err)
		assert.Equal(t, "acme,globex", stored.Tenants)

		entries, _, err := l.AuditEntries(ctx, models.AllTenants(), models.AuditSearch{Limit: 10})
		require.NoError(t, err)
		var actions []string
		for _, e := range entries {
			actions = append(actions, e.Action)
		}
		assert.ElementsMatch(t, []string{models.AuditUserCreate, models.AuditUserUpdate}, actions,
			"the creation and the change of claims are audited; an unchanged sign-in is not")

		_, err = l.SignInFederated(ctx, login("s2", models.RoleAdmin, "acme", "globex"))
		assert.Equal(t, models.CodeConflict, models.ErrorCode(err), "a state is good for one sign-in")

		_, err = l.Login(ctx, models.LoginAttempt{Email: "ann@example.com", Password: "", ClientIP: "10.0.0.1", Limits: models.DefaultLoginLimits})
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "a federated user has no password to sign in with")

		_, err = l.CreateUser(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI},
			models.NewUser{Email: "bob@example.com", Password: goodPassword, Role: models.RoleAdmin})
		require.NoError(t, err)
		_, err = l.SignInFederated(ctx, models.FederatedLogin{Issuer: issuer, Subject: "sub-mallory", Email: "bob@example.com",
			Role: models.RoleAdmin, State: "s3"})
		assert.Equal(t, models.CodeConflict, models.ErrorCode(err), "an email claim never takes over a local account")
		bob, err := l.UserByEmail(ctx, "bob@example.com")
		require.NoError(t, err)
		assert.False(t, bob.Federated())

		for name, in := range map[string]models.FederatedLogin{
			"no role":          {Issuer: issuer, Subject: "sub-x", Email: "x@example.com", State: "s4"},
			"unknown role":     {Issuer: issuer, Subject: "sub-x", Email: "x@example.com", Role: "root", State: "s5"},
			"empty tenants":    {Issuer: issuer, Subject: "sub-x", Email: "x@example.com", Role: models.RoleAuditor, Tenants: []string{" "}, State: "s6"},
			"no email":         {Issuer: issuer, Subject: "sub-x", Role: models.RoleAuditor, State: "s7"},
			"no state":         {Issuer: issuer, Subject: "sub-x", Email: "x@example.com", Role: models.RoleAuditor},
			"no subject":       {Issuer: issuer, Email: "x@example.com", Role: models.RoleAuditor, State: "s8"},
			"display in email": {Issuer: issuer, Subject: "sub-x", Email: "X <x@example.com>", Role: models.RoleAuditor, State: "s9"},
		} {
			_, err := l.SignInFederated(ctx, in)
			assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), name)
		}
		_, err = l.UserByEmail(ctx, "x@example.com")
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "no refused sign-in created a user")
	})
}

func TestSignInFederatedRefusesDisabledUser(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		l := testdb.Ledger(t, d)
		in := models.FederatedLogin{Issuer: "https://id.example.com", Subject: "sub-ann", Email: "ann@example.com",
			Role: models.RoleReviewer, State: "s1"}
		u, err := l.SignInFederated(ctx, in)
		require.NoError(t, err)
		require.NoError(t, l.DB().Exec("UPDATE users SET disabled_at = created_at WHERE id = ?", u.ID).Error)
		in.State = "s2"
		_, err = l.SignInFederated(ctx, in)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "the provider's word does not undo an admin's disabling")
	})
}
