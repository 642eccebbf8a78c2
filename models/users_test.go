package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const goodPassword = "correct horse battery"

func TestCreateUser(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		l := testdb.Ledger(t, d)
		for _, name := range []string{"acme", "globex"} {
			_, err := l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, name)
			require.NoError(t, err)
		}

		u, err := l.CreateUser(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, models.NewUser{Email: " Rita@Example.COM ", Password: goodPassword, Role: models.RoleReviewer, Tenants: []string{"globex", " acme", "acme", ""}})
		require.NoError(t, err)
		assert.Equal(t, "rita@example.com", u.Email, "stored lower-cased")
		assert.Equal(t, "acme,globex", u.Tenants, "canonical tenant list")
		assert.Equal(t, []string{"acme", "globex"}, u.TenantList())
		assert.NotContains(t, u.PasswordHash, goodPassword)
		assert.True(t, u.Scope().Allows("acme"))
		assert.False(t, u.Scope().Allows("initech"))

		byEmail, err := l.UserByEmail(ctx, "RITA@example.com")
		require.NoError(t, err)
		assert.Equal(t, u.ID, byEmail.ID)
		byID, err := l.UserByID(ctx, u.ID)
		require.NoError(t, err)
		assert.Equal(t, u.Email, byID.Email)

		all, err := l.CreateUser(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, models.NewUser{Email: "ada@example.com", Password: goodPassword, Role: models.RoleAdmin})
		require.NoError(t, err)
		assert.Nil(t, all.TenantList(), "no tenants: every tenant")
		assert.True(t, all.Scope().Unlimited())

		users, err := l.Users(ctx, models.AllTenants())
		require.NoError(t, err)
		require.Len(t, users, 2)
		assert.Equal(t, "ada@example.com", users[0].Email)

		for name, tc := range map[string]struct {
			in   models.NewUser
			code models.Code
		}{
			"taken email in another case": {models.NewUser{Email: "RITA@example.com", Password: goodPassword, Role: models.RoleAuditor}, models.CodeConflict},
			"short password":              {models.NewUser{Email: "x@example.com", Password: "elevenchars", Role: models.RoleAuditor}, models.CodeInvalid},
			"unknown role":                {models.NewUser{Email: "x@example.com", Password: goodPassword, Role: "root"}, models.CodeInvalid},
			"not an address":              {models.NewUser{Email: "Rita <rita@example.com>", Password: goodPassword, Role: models.RoleAuditor}, models.CodeInvalid},
			"unknown tenant":              {models.NewUser{Email: "x@example.com", Password: goodPassword, Role: models.RoleAuditor, Tenants: []string{"initech"}}, models.CodeNotFound},
		} {
			_, err := l.CreateUser(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, tc.in)
			assert.Equal(t, tc.code, models.ErrorCode(err), name)
		}
		_, err = l.UserByEmail(ctx, "nobody@example.com")
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
	})
}

func TestLogin(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
		l := models.New(models.Config{DB: testdb.Open(t, d), Dialect: d, Now: func() time.Time { return now }})
		_, err := l.CreateUser(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, models.NewUser{Email: "rita@example.com", Password: goodPassword, Role: models.RoleReviewer})
		require.NoError(t, err)
		limits := models.LoginLimits{Window: 15 * time.Minute, PerEmailIP: 2, PerIP: 4, PerEmail: 3}
		login := func(email, password, ip string) error {
			_, err := l.Login(ctx, models.LoginAttempt{Email: email, Password: password, ClientIP: ip, Limits: limits})
			return err
		}

		require.NoError(t, login("RITA@example.com", goodPassword, "10.0.0.1"))
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(login("rita@example.com", "wrong password!", "10.0.0.1")))
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(login("nobody@example.com", goodPassword, "10.0.0.9")), "unknown email: same answer")

		assert.Equal(t, models.CodeNotFound, models.ErrorCode(login("rita@example.com", "wrong password!", "10.0.0.1")))
		assert.Equal(t, models.CodeThrottled, models.ErrorCode(login("rita@example.com", goodPassword, "10.0.0.1")), "per email and address")
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(login("rita@example.com", "wrong password!", "10.0.0.2")), "another address may still try")
		assert.Equal(t, models.CodeThrottled, models.ErrorCode(login("rita@example.com", goodPassword, "10.0.0.3")), "per email from every address")

		now = now.Add(16 * time.Minute)
		require.NoError(t, login("rita@example.com", goodPassword, "10.0.0.1"), "the window passed")

		// A disabled user cannot sign in, even with the right password.
		require.NoError(t, l.DB().Exec("UPDATE users SET disabled_at = ? WHERE email = ?", now, "rita@example.com").Error)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(login("rita@example.com", goodPassword, "10.0.0.1")))
	})
}

func TestSessions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		l := testdb.Ledger(t, d)
		u, err := l.CreateUser(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, models.NewUser{Email: "rita@example.com", Password: goodPassword, Role: models.RoleReviewer})
		require.NoError(t, err)
		token, s, err := l.StartSession(ctx, u.ID)
		require.NoError(t, err)
		assert.NotEqual(t, token, s.ID, "only the token's hash is stored")

		got, gs, err := l.SessionUser(ctx, token)
		require.NoError(t, err)
		assert.Equal(t, u.ID, got.ID)
		assert.Equal(t, s.ID, gs.ID)

		require.NoError(t, l.EndSession(ctx, token))
		_, _, err = l.SessionUser(ctx, token)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
		_, _, err = l.SessionUser(ctx, "")
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
		_, _, err = l.SessionUser(ctx, s.ID)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "the stored hash is not a token")
	})
}
