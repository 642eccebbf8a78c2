package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/idemgate/idemgate/models"
)

// minSessionKeyLen is the shortest session secret accepted: 32 characters.
const minSessionKeyLen = 32

// sessionKey returns IDEMGATE_SESSION_KEY, checked; empty when it is unset, and the gateway
// then keeps a generated one in the database (see internal/app).
func (env *environment) sessionKey() (string, error) {
	key := env.getenv("IDEMGATE_SESSION_KEY")
	if key != "" && len(key) < minSessionKeyLen {
		return "", fmt.Errorf("IDEMGATE_SESSION_KEY must have at least %d characters", minSessionKeyLen)
	}
	return key, nil
}

// The demo's console logins (serve --demo): one per role, limited to the demo tenant, sharing
// one password. The setting keeps its first name, so a demo database made by an earlier
// release keeps its password.
const (
	demoReviewerEmail   = "reviewer@demo.local"
	demoAuditorEmail    = "auditor@demo.local"
	demoAdminEmail      = "admin@demo.local"
	demoPasswordSetting = "demo.reviewer_password"
)

// demoLogins lists the demo's users with what each role opens in the console.
var demoLogins = []struct {
	email string
	role  models.Role
	opens string
}{
	{demoReviewerEmail, models.RoleReviewer, "/reviews: decide what the gateway could not"},
	{demoAuditorEmail, models.RoleAuditor, "/audit and /exports: the audit log, signed exports"},
	{demoAdminEmail, models.RoleAdmin, "/admin: users, API keys, webhooks"},
}

// demoUsers makes sure the demo's users exist and returns their password. Like the demo API
// key, the password is kept in clear only because --demo asked for a playground, so that a
// restarted demo can print it again.
func (env *environment) demoUsers(ctx context.Context, l *models.Ledger) (string, error) {
	password, err := l.EnsureSetting(ctx, demoPasswordSetting, randomHex(12))
	if err != nil {
		return "", err
	}
	for _, u := range demoLogins {
		_, err = l.CreateUser(ctx, models.AllTenants(), cli, models.NewUser{Email: u.email, Password: password, Role: u.role, Tenants: []string{"demo"}})
		if err != nil && models.ErrorCode(err) != models.CodeConflict {
			return "", err
		}
	}
	return password, nil
}

// randomHex returns n random bytes in hex: a password that is easy to copy and type.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
