package models

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"
)

// AuditUserUpdate records a change of a user's role, tenants or email; for a federated user it
// is the identity provider's claims that changed, seen at sign-in.
const AuditUserUpdate = "user.update"

// ssoStateTTL is how long a used sign-in state is remembered. A callback is only good for
// minutes (the pending sign-in in the browser expires sooner), so a day is ample.
const ssoStateTTL = 24 * time.Hour

// FederatedLogin is a sign-in an OpenID Connect provider vouched for: who the person is there
// (issuer and subject), and the role and tenants its claims give them.
type FederatedLogin struct {
	Issuer  string
	Subject string
	Email   string
	Role    Role
	// Tenants limits the user to these tenants; nil means every tenant (the provider said so
	// explicitly). A non-nil empty list is refused: it would otherwise read as "every tenant".
	Tenants []string
	// State is the sign-in's state parameter; each is accepted once.
	State     string
	RequestID string
}

// SignInFederated finds or creates the user an identity provider vouched for and brings their
// role, tenants and email up to date with its claims, each change audited in the same
// transaction. The user is looked up by issuer and subject only: an email is never enough to
// take over a local account, so a local user with the same email is CodeConflict. A state used
// before is CodeConflict too; a disabled user is CodeNotFound; claims that give no valid role
// or no tenant are CodeInvalid.
func (l *Ledger) SignInFederated(ctx context.Context, in FederatedLogin) (*User, error) {
	if in.Issuer == "" || in.Subject == "" || in.State == "" {
		return nil, errorf(CodeInvalid, "a federated sign-in needs an issuer, a subject and a state")
	}
	email, err := normalEmail(in.Email)
	if err != nil {
		return nil, err
	}
	if !in.Role.Valid() {
		return nil, errorf(CodeInvalid, "role %q: use reviewer, auditor or admin", in.Role)
	}
	tenants := normalTenants(in.Tenants)
	if in.Tenants != nil && len(tenants) == 0 {
		return nil, errorf(CodeInvalid, "the identity provider names no tenant for this user")
	}
	now := l.clock()
	if err := l.useSSOState(ctx, in.Issuer, in.State, now); err != nil {
		return nil, err
	}
	by := Requester{Actor: "user:" + email, RequestID: in.RequestID}
	var u User
	err = l.txn(ctx, "federated sign-in", func(tx *gorm.DB) ([]string, error) {
		err := tx.Where("issuer = ? AND subject = ?", in.Issuer, in.Subject).Take(&u).Error
		if notFound(err) {
			u = User{ID: newID("usr"), Email: email, Role: in.Role, Tenants: strings.Join(tenants, ","),
				CreatedAt: now, Issuer: in.Issuer, Subject: in.Subject}
			if err := tx.Create(&u).Error; err != nil {
				return nil, err
			}
			entry := u.createdAudit(by)
			entry.Detail["issuer"] = in.Issuer
			_, err = l.appendAudit(tx, now, entry)
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		if u.DisabledAt != nil {
			return nil, errorf(CodeNotFound, "this user is disabled; ask an admin")
		}
		before := u
		u.Email, u.Role, u.Tenants = email, in.Role, strings.Join(tenants, ",")
		if u.Email == before.Email && u.Role == before.Role && u.Tenants == before.Tenants {
			return nil, nil
		}
		if err := tx.Model(&User{}).Where("id = ?", u.ID).
			Updates(map[string]any{"email": u.Email, "role": u.Role, "tenants": u.Tenants}).Error; err != nil {
			return nil, err
		}
		_, err = l.appendAudit(tx, now, by.entry(AuditUserUpdate, u.auditTenant(), map[string]any{
			"user": u.ID, "issuer": in.Issuer,
			"from": map[string]any{"email": before.Email, "role": string(before.Role), "tenants": before.tenantsWord()},
			"to":   map[string]any{"email": u.Email, "role": string(u.Role), "tenants": u.tenantsWord()},
		}))
		return nil, err
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return nil, errorf(CodeConflict, "a user with email %s already exists in the console; an admin must remove it before %s can sign in through the identity provider", email, email)
	}
	if err != nil {
		return nil, err
	}
	return &u, nil
}

// useSSOState records state as used, or refuses it as used before. It commits on its own, before
// the sign-in's transaction, so that even a refused sign-in spends its state.
func (l *Ledger) useSSOState(ctx context.Context, issuer, state string, now time.Time) error {
	db := l.scope(ctx)
	if err := db.Exec("DELETE FROM sso_states WHERE used_at < ?", now.Add(-ssoStateTTL)).Error; err != nil {
		return unavailable("prune sign-in states", err)
	}
	sum := sha256.Sum256([]byte(issuer + "\x00" + state))
	err := db.Exec("INSERT INTO sso_states (id, used_at) VALUES (?, ?)", hex.EncodeToString(sum[:]), now).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return errorf(CodeConflict, "this sign-in was already used; start again")
	}
	if err != nil {
		return unavailable("record sign-in state", err)
	}
	return nil
}

// EndFederatedSessions ends the live sessions of the user an identity provider knows as
// (issuer, subject), and says how many: the provider vouched for the person but refused them
// access (their role or tenants taken away there), so they are deprovisioned, and what they
// had signed in to here ends at once rather than at its lifetime. No such user is no error.
func (l *Ledger) EndFederatedSessions(ctx context.Context, issuer, subject string) (int64, error) {
	res := l.scope(ctx).Model(&UserSession{}).
		Where("ended_at IS NULL AND user_id IN (SELECT id FROM users WHERE issuer = ? AND subject = ?)", issuer, subject).
		Update("ended_at", l.clock())
	if res.Error != nil {
		return 0, unavailable("end federated sessions", res.Error)
	}
	return res.RowsAffected, nil
}
