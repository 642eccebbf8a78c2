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

// The demo's reviewer login (serve --demo).
const (
	demoReviewerEmail   = "reviewer@demo.local"
	demoPasswordSetting = "demo.reviewer_password"
)

// demoReviewer makes sure the demo reviewer exists and returns its password. Like the demo API
// key, the password is kept in clear only because --demo asked for a playground, so that a
// restarted demo can print it again.
func (env *environment) demoReviewer(ctx context.Context, l *models.Ledger) (string, error) {
	password, err := l.EnsureSetting(ctx, demoPasswordSetting, randomHex(12))
	if err != nil {
		return "", err
	}
	_, err = l.CreateUser(ctx, models.AllTenants(), cli, models.NewUser{Email: demoReviewerEmail, Password: password, Role: models.RoleReviewer, Tenants: []string{"demo"}})
	if err != nil && models.ErrorCode(err) != models.CodeConflict {
		return "", err
	}
	return password, nil
}

// randomHex returns n random bytes in hex: a password that is easy to copy and type.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
