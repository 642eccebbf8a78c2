package models

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Audit actions of changes to a user.
const (
	AuditUserDisable  = "user.disable"
	AuditUserEnable   = "user.enable"
	AuditUserRole     = "user.role"
	AuditUserPassword = "user.password"
)

// UserChange is one change to a console user: disable or enable them, give them another role,
// or set a new password. Exactly one member is set.
type UserChange struct {
	Disable  *bool
	Role     Role
	Password string
}

// ChangeUser applies ch to the user with id, within scope s: the same rule as CreateUser, so
// an admin limited to tenants changes only users limited to some of their tenants, and a user
// outside s is CodeNotFound, as a missing one. Nobody disables or demotes themselves (the
// console would lock its last admin out). The change, the end of the user's sessions when they
// are disabled or get a new password, and the audit entry commit together; the password is
// never in the entry.
func (l *Ledger) ChangeUser(ctx context.Context, s Scope, by Requester, id string, ch UserChange) (*User, error) {
	var u User
	err := l.scope(ctx).Where("id = ?", id).Take(&u).Error
	if notFound(err) || (err == nil && !s.Unlimited() && (u.TenantList() == nil || !s.Covers(u.TenantList()))) {
		return nil, errorf(CodeNotFound, "user not found")
	}
	if err != nil {
		return nil, unavailable("read user", err)
	}
	self := by.Person().Is(Person{UserID: u.ID, Actor: "user:" + u.Email})
	now := l.clock()
	fields := map[string]any{}
	action, detail := "", map[string]any{"email": u.Email}
	endSessions := false
	switch {
	case ch.Disable != nil && *ch.Disable:
		if self {
			return nil, errorf(CodeInvalid, "you cannot disable yourself; ask another admin")
		}
		fields["disabled_at"], action, endSessions = now, AuditUserDisable, true
	case ch.Disable != nil:
		fields["disabled_at"], action = nil, AuditUserEnable
	case ch.Role != "":
		if !ch.Role.Valid() {
			return nil, errorf(CodeInvalid, "role %q: use reviewer, auditor or admin", ch.Role)
		}
		if self && ch.Role != u.Role {
			return nil, errorf(CodeInvalid, "you cannot change your own role; ask another admin")
		}
		fields["role"], action = ch.Role, AuditUserRole
		detail["from"], detail["to"] = string(u.Role), string(ch.Role)
	case ch.Password != "":
		if n := len([]rune(ch.Password)); n < MinPasswordLen || len(ch.Password) > maxPasswordLen {
			return nil, errorf(CodeInvalid, "the password must have at least %d characters", MinPasswordLen)
		}
		hash, err := hashPassword(ch.Password)
		if err != nil {
			return nil, fmt.Errorf("ledger: hash password: %w", err)
		}
		fields["password_hash"], action, endSessions = hash, AuditUserPassword, true
	default:
		return nil, errorf(CodeInvalid, "nothing to change")
	}
	tenant := u.auditTenant()
	detail["tenants"] = u.tenantsWord()
	err = l.txn(ctx, "change user "+u.ID, func(tx *gorm.DB) ([]string, error) {
		res := tx.Model(&User{}).Where("id = ?", u.ID).Updates(fields)
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected != 1 {
			return nil, errorf(CodeNotFound, "user not found")
		}
		if endSessions {
			if err := tx.Model(&UserSession{}).Where("user_id = ? AND ended_at IS NULL", u.ID).Update("ended_at", now).Error; err != nil {
				return nil, err
			}
		}
		if ch.Disable != nil || ch.Password != "" {
			if err := expireInvites(tx, u.ID, now); err != nil {
				return nil, err
			}
		}
		_, err := l.appendAudit(tx, now, by.entry(action, tenant, detail))
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	return l.UserByID(ctx, u.ID)
}
