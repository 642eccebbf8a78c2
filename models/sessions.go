package models

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"
)

// UserSession is a console sign-in. The browser holds a random token in its (signed and
// encrypted) session cookie; the ledger keeps only the token's hash, so that signing out ends
// the session for good, even for a copy of the cookie, and a read of the table cannot be
// replayed as a cookie.
type UserSession struct {
	ID        string `gorm:"primaryKey"` // hex SHA-256 of the token
	UserID    string
	CreatedAt time.Time
	EndedAt   *time.Time
}

// TableName keeps GORM off its pluralisation guesses.
func (UserSession) TableName() string { return "user_sessions" }

// StartSession records a new session of user and returns its token, to be kept by the browser
// only.
func (l *Ledger) StartSession(ctx context.Context, userID string) (string, *UserSession, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, fmt.Errorf("ledger: session token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(b[:])
	s := &UserSession{ID: sessionID(token), UserID: userID, CreatedAt: l.clock()}
	if err := l.scope(ctx).Create(s).Error; err != nil {
		return "", nil, unavailable("start session", err)
	}
	return token, s, nil
}

// SessionUser returns the live session of token and its user. An unknown or ended session, or
// a disabled user, is CodeNotFound.
func (l *Ledger) SessionUser(ctx context.Context, token string) (*User, *UserSession, error) {
	if token == "" {
		return nil, nil, errorf(CodeNotFound, "no session")
	}
	var s UserSession
	err := l.scope(ctx).Where("id = ? AND ended_at IS NULL", sessionID(token)).Take(&s).Error
	if notFound(err) {
		return nil, nil, errorf(CodeNotFound, "session ended or unknown")
	}
	if err != nil {
		return nil, nil, unavailable("read session", err)
	}
	u, err := l.UserByID(ctx, s.UserID)
	if err != nil {
		return nil, nil, err
	}
	if u.DisabledAt != nil {
		return nil, nil, errorf(CodeNotFound, "user disabled")
	}
	return u, &s, nil
}

// EndSession ends the session of token; ending an ended or unknown one does nothing.
func (l *Ledger) EndSession(ctx context.Context, token string) error {
	err := l.scope(ctx).Model(&UserSession{}).Where("id = ? AND ended_at IS NULL", sessionID(token)).
		Update("ended_at", l.clock()).Error
	if err != nil {
		return unavailable("end session", err)
	}
	return nil
}

func sessionID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
