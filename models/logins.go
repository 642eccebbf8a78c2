package models

import (
	"context"
	"strings"
	"time"

	"gorm.io/gorm"
)

// CodeThrottled: too many failed sign-ins from this address or for this account; the caller
// must wait. It is declared here, beside the only rule that returns it.
const CodeThrottled Code = "throttled"

// LoginLimits bound failed sign-ins within a sliding window. They are kept in the database, so
// they hold across restarts and across every replica sharing it.
type LoginLimits struct {
	Window time.Duration
	// PerEmailIP bounds guesses at one account from one address: the limit a person who
	// mistypes meets.
	PerEmailIP int
	// PerIP bounds guesses from one address at any accounts (password spraying). It is
	// higher, because an office may share one address.
	PerIP int
	// PerEmail bounds guesses at one account from every address together. It is the highest,
	// so that an attacker needs many addresses to lock a person out.
	PerEmail int
}

// DefaultLoginLimits: 5 failures per account and address, 20 per address, 50 per account,
// within 15 minutes.
var DefaultLoginLimits = LoginLimits{Window: 15 * time.Minute, PerEmailIP: 5, PerIP: 20, PerEmail: 50}

// LoginAttempt is one sign-in.
type LoginAttempt struct {
	Email    string
	Password string
	ClientIP string
	Limits   LoginLimits
}

// loginFailure is a row of login_failures. A row is written before the password is checked
// and deleted again when it matches, so that concurrent guesses count against each other and
// cannot slip past the limit together.
type loginFailure struct {
	ID       int64 `gorm:"primaryKey;autoIncrement"`
	Email    string
	ClientIP string `gorm:"column:client_ip"`
	At       time.Time
}

func (loginFailure) TableName() string { return "login_failures" }

// Login checks an email and password. A wrong password, an unknown email and a disabled user
// are all CodeNotFound, indistinguishable to the caller; too many recent failures is
// CodeThrottled, and then the password is not even checked.
func (l *Ledger) Login(ctx context.Context, in LoginAttempt) (*User, error) {
	email := strings.ToLower(strings.TrimSpace(in.Email))
	now := l.clock()
	since := now.Add(-in.Limits.Window)
	db := l.scope(ctx)
	if err := db.Where("at < ?", since).Delete(&loginFailure{}).Error; err != nil {
		return nil, unavailable("prune login failures", err)
	}
	mark := loginFailure{Email: email, ClientIP: in.ClientIP, At: now}
	if err := db.Create(&mark).Error; err != nil {
		return nil, unavailable("record login attempt", err)
	}
	throttled, err := l.overLimits(db, email, in.ClientIP, since, in.Limits)
	if err != nil {
		return nil, err
	}
	if throttled {
		// A refused attempt is not counted: the lockout ends one window after the last
		// real guess, however often the form is sent meanwhile.
		if err := db.Delete(&mark).Error; err != nil {
			return nil, unavailable("drop login attempt", err)
		}
		return nil, errorf(CodeThrottled, "too many failed sign-ins; try again later")
	}
	u, err := l.UserByEmail(ctx, email)
	if err != nil && ErrorCode(err) != CodeNotFound {
		return nil, err
	}
	// Whoever cannot sign in with a password (no such user, a disabled one, one of an identity
	// provider) costs the same hashing as a real check, so timing tells nothing either.
	usable := u != nil && u.DisabledAt == nil && !u.Federated()
	hash := dummyHash()
	if usable {
		hash = u.PasswordHash
	}
	if !checkPassword(hash, in.Password) || !usable {
		return nil, errorf(CodeNotFound, "wrong email or password")
	}
	// A success forgives this account's failures, so a person who mistyped starts afresh.
	if err := db.Where("email = ?", email).Delete(&loginFailure{}).Error; err != nil {
		return nil, unavailable("clear login failures", err)
	}
	return u, nil
}

// overLimits counts the attempts within the window, including those being checked right now.
func (l *Ledger) overLimits(db *gorm.DB, email, ip string, since time.Time, lim LoginLimits) (bool, error) {
	checks := []struct {
		where string
		args  []any
		limit int
	}{
		{"email = ? AND client_ip = ? AND at >= ?", []any{email, ip, since}, lim.PerEmailIP},
		{"client_ip = ? AND at >= ?", []any{ip, since}, lim.PerIP},
		{"email = ? AND at >= ?", []any{email, since}, lim.PerEmail},
	}
	for _, c := range checks {
		if c.limit <= 0 {
			continue
		}
		var n int64
		if err := db.Model(&loginFailure{}).Where(c.where, c.args...).Count(&n).Error; err != nil {
			return false, unavailable("count login failures", err)
		}
		// n includes this attempt: limit failures are allowed, the next one is refused.
		if n > int64(c.limit) {
			return true, nil
		}
	}
	return false, nil
}
