package models

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// An invite lets a new console user choose their own password: an admin no longer types one
// for someone else (and then has to pass it on). The link holds a random token shown once; the
// ledger keeps only its hash, so a copy of the database opens nothing. It can be used once,
// within InviteTTL.

// InviteTTL is how long an invite link works.
const InviteTTL = 72 * time.Hour

// Invite is one invite link, by its token's hash.
type Invite struct {
	TokenHash string `gorm:"primaryKey"`
	UserID    string
	CreatedAt time.Time
	ExpiresAt time.Time
	UsedAt    *time.Time
}

// TableName is the invites' table.
func (Invite) TableName() string { return "user_invites" }

// invitesSchema is migration step 26's.
const invitesSchema = `
CREATE TABLE user_invites (
	token_hash TEXT PRIMARY KEY,
	user_id    TEXT NOT NULL REFERENCES users(id),
	created_at {{ts}} NOT NULL,
	expires_at {{ts}} NOT NULL,
	used_at    {{ts}}
);
`

// PublicURL is the console's address as people reach it (serve --public-url), without a
// trailing slash; "" when none was given. Links people follow are built on it.
func (l *Ledger) PublicURL() string { return l.publicURL }

// expireInvites ends every invite of user id still outstanding: an invite is an offer to set
// the first credentials of the account as it was, and stops being one when an admin sets the
// password, disables or enables the account.
func expireInvites(tx *gorm.DB, id string, now time.Time) error {
	return tx.Model(&Invite{}).Where("user_id = ? AND used_at IS NULL AND expires_at > ?", id, now).Update("expires_at", now).Error
}

func inviteHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// InviteUser creates a user without a password, within scope s as CreateUser does, and returns
// them with the token of their invite link: the one way to set their first password.
func (l *Ledger) InviteUser(ctx context.Context, s Scope, by Requester, in NewUser) (*User, string, error) {
	email, tenants, err := checkNewUser(s, in)
	if err != nil {
		return nil, "", err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, "", fmt.Errorf("ledger: invite token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(b[:])
	now := l.clock()
	u := &User{ID: newID("usr"), Email: email, Role: in.Role, Tenants: strings.Join(tenants, ","), CreatedAt: now}
	u, err = l.insertUser(ctx, by, u, tenants, func(tx *gorm.DB) error {
		if err := tx.Create(&Invite{TokenHash: inviteHash(token), UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(InviteTTL)}).Error; err != nil {
			return err
		}
		_, err := l.appendAudit(tx, now, AuditInput{Actor: by.Actor, Action: "user.invite", Outcome: OutcomeOK, RequestID: by.RequestID,
			Detail: map[string]any{"user_id": u.ID, "email": u.Email, "expires_at": now.Add(InviteTTL).UTC()}})
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return u, token, nil
}

// errInvite is the one answer to a link that does not work, whatever the reason: used,
// expired, never made, or its user disabled.
var errInvite = errorf(CodeNotFound, "this invite link does not work: it was used already, it expired, or it was never made; ask an admin for a new one")

// InviteFor returns the user invite token is for, while it works.
func (l *Ledger) InviteFor(ctx context.Context, token string) (*User, error) {
	var inv Invite
	err := l.scope(ctx).Where("token_hash = ? AND used_at IS NULL AND expires_at > ?", inviteHash(token), l.clock()).Take(&inv).Error
	if notFound(err) {
		return nil, errInvite
	}
	if err != nil {
		return nil, unavailable("read invite", err)
	}
	u, err := l.UserByID(ctx, inv.UserID)
	if err != nil || u.DisabledAt != nil {
		return nil, errInvite
	}
	return u, nil
}

// AcceptInvite sets the password of the user invite token is for and uses the token up, both
// or neither: a link works once.
func (l *Ledger) AcceptInvite(ctx context.Context, token, password string) (*User, error) {
	if err := checkPasswordLength(password); err != nil {
		return nil, err
	}
	u, err := l.InviteFor(ctx, token)
	if err != nil {
		return nil, err
	}
	hash, err := hashPassword(password)
	if err != nil {
		return nil, fmt.Errorf("ledger: hash password: %w", err)
	}
	now := l.clock()
	err = l.txn(ctx, "accept invite", func(tx *gorm.DB) ([]string, error) {
		res := tx.Model(&Invite{}).Where("token_hash = ? AND used_at IS NULL AND expires_at > ?", inviteHash(token), now).Update("used_at", now)
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected != 1 {
			return nil, errInvite
		}
		res = tx.Model(&User{}).Where("id = ? AND disabled_at IS NULL", u.ID).Update("password_hash", hash)
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected != 1 {
			return nil, errInvite // disabled since the link was read: the token stays unused
		}
		_, err := l.appendAudit(tx, now, AuditInput{Actor: "user:" + u.Email, Action: "user.invite_accept", Outcome: OutcomeOK,
			Detail: map[string]any{"user_id": u.ID}})
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}
