package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"

	"github.com/idemgate/idemgate/models"
)

// sessionKeySetting keeps the generated console session secret when IDEMGATE_SESSION_KEY is
// unset, so sessions survive restarts and every replica sharing the database agrees on it.
const sessionKeySetting = "session.key"

// minSessionKeyLen is the shortest session secret accepted: 32 characters.
const minSessionKeyLen = 32

// sessionKey returns the console's session secret: IDEMGATE_SESSION_KEY, or one generated
// and kept in the database (SPEC §9), with a warning, since anyone who can read the database
// can then forge sessions.
func (env *environment) sessionKey(ctx context.Context, l *models.Ledger, log *slog.Logger) (string, error) {
	if key := env.getenv("IDEMGATE_SESSION_KEY"); key != "" {
		if len(key) < minSessionKeyLen {
			return "", fmt.Errorf("IDEMGATE_SESSION_KEY must have at least %d characters", minSessionKeyLen)
		}
		return key, nil
	}
	key, err := l.EnsureSetting(ctx, sessionKeySetting, randomSecret())
	if err != nil {
		return "", err
	}
	log.Warn("IDEMGATE_SESSION_KEY is not set: using a session key generated and kept in the database; set it in production")
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
	_, err = l.CreateUser(ctx, models.NewUser{Email: demoReviewerEmail, Password: password, Role: models.RoleReviewer, Tenants: []string{"demo"}})
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

// randomSecret returns 32 random bytes, url-safe base64 (43 characters).
func randomSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
