package models

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Role says what a console user may do (docs/CONSOLE.md).
type Role string

// The console's roles.
const (
	// RoleReviewer resolves, approves and proposes.
	RoleReviewer Role = "reviewer"
	// RoleAuditor reads and exports only.
	RoleAuditor Role = "auditor"
	// RoleAdmin manages users, tenants and API keys, and does everything a reviewer does.
	RoleAdmin Role = "admin"
)

// Roles lists every role, least powerful first.
var Roles = []Role{RoleAuditor, RoleReviewer, RoleAdmin}

// Valid reports whether r is one of the roles.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// MinPasswordLen is the shortest password a user may be given. Length is what makes a
// password hard to guess; no composition rules are imposed.
const MinPasswordLen = 12

// maxPasswordLen bounds the work a login request can cause.
const maxPasswordLen = 1024

// User is a person with a console login.
type User struct {
	ID           string `gorm:"primaryKey"`
	Email        string // stored lower-cased: addresses are compared without case
	PasswordHash string // argon2id, PHC string format
	Role         Role
	Tenants      string // comma-separated tenant names; "" means every tenant
	CreatedAt    time.Time
	DisabledAt   *time.Time
	// Issuer and Subject name the user at an OpenID Connect provider; both are '' for a local
	// user. A federated user has no password and signs in only through the provider.
	Issuer  string
	Subject string
}

// Federated reports whether u signs in through an identity provider rather than a password.
func (u *User) Federated() bool { return u.Issuer != "" }

// TenantList returns the tenants the user is limited to, or nil when the user sees every
// tenant.
func (u *User) TenantList() []string {
	if u.Tenants == "" {
		return nil
	}
	return strings.Split(u.Tenants, ",")
}

// Scope is the part of the ledger the user may see: every tenant for a user limited to none.
func (u *User) Scope() Scope {
	if list := u.TenantList(); list != nil {
		return OnlyTenants(list...)
	}
	return AllTenants()
}

// NewUser is what CreateUser needs.
type NewUser struct {
	Email    string
	Password string
	Role     Role
	// Tenants limits the user to these tenants; empty means every tenant. Each must exist.
	Tenants []string
}

// CreateUser records a console user with a hashed password, within scope s: a requester
// limited to tenants may only create users limited to some of them, so that nobody grants more
// than they hold. The user and its audit entry commit together. A taken email is CodeConflict;
// an unknown tenant, or one outside s, is CodeNotFound; a malformed email, unknown role, short
// password or a user wider than s is CodeInvalid.
func (l *Ledger) CreateUser(ctx context.Context, s Scope, by Requester, in NewUser) (*User, error) {
	email, tenants, err := checkNewUser(s, in)
	if err != nil {
		return nil, err
	}
	if err := checkPasswordLength(in.Password); err != nil {
		return nil, err
	}
	hash, err := hashPassword(in.Password)
	if err != nil {
		return nil, fmt.Errorf("ledger: hash password: %w", err)
	}
	return l.insertUser(ctx, by, &User{ID: newID("usr"), Email: email, PasswordHash: hash, Role: in.Role,
		Tenants: strings.Join(tenants, ","), CreatedAt: l.clock()}, tenants, nil)
}

// checkNewUser checks a new user's email, role and tenants within scope s, and returns them
// normalised.
func checkNewUser(s Scope, in NewUser) (email string, tenants []string, err error) {
	if email, err = normalEmail(in.Email); err != nil {
		return "", nil, err
	}
	if !in.Role.Valid() {
		return "", nil, errorf(CodeInvalid, "role %q: use reviewer, auditor or admin", in.Role)
	}
	tenants = normalTenants(in.Tenants)
	if !s.Unlimited() {
		if len(tenants) == 0 {
			return "", nil, errorf(CodeInvalid, "you can only create users limited to some of your own tenants")
		}
		for _, t := range tenants {
			if !s.Allows(t) {
				return "", nil, errorf(CodeNotFound, "tenant %q does not exist", t)
			}
		}
	}
	return email, tenants, nil
}

func checkPasswordLength(password string) error {
	if n := len([]rune(password)); n < MinPasswordLen || len(password) > maxPasswordLen {
		return errorf(CodeInvalid, "the password must have at least %d characters", MinPasswordLen)
	}
	return nil
}

// insertUser writes u, checking its tenants exist, with its audit entry and whatever also must
// commit with it (also, nil for nothing).
func (l *Ledger) insertUser(ctx context.Context, by Requester, u *User, tenants []string, also func(tx *gorm.DB) error) (*User, error) {
	now, email := u.CreatedAt, u.Email
	err := l.txn(ctx, "create user", func(tx *gorm.DB) ([]string, error) {
		if len(tenants) > 0 {
			var known []string
			if err := tx.Model(&Tenant{}).Where("name IN ?", tenants).Pluck("name", &known).Error; err != nil {
				return nil, err
			}
			for _, t := range tenants {
				if !slices.Contains(known, t) {
					return nil, errorf(CodeNotFound, "tenant %q does not exist", t)
				}
			}
		}
		if err := tx.Create(u).Error; err != nil {
			return nil, err
		}
		if also != nil {
			if err := also(tx); err != nil {
				return nil, err
			}
		}
		_, err := l.appendAudit(tx, now, u.createdAudit(by))
		return nil, err
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return nil, errorf(CodeConflict, "a user with email %s already exists", email)
	}
	if err != nil {
		return nil, err
	}
	return u, nil
}

// UserByEmail returns the user with that email, in any case. None is CodeNotFound.
func (l *Ledger) UserByEmail(ctx context.Context, email string) (*User, error) {
	return l.takeUser(ctx, "email = ?", strings.ToLower(strings.TrimSpace(email)))
}

// UserByID returns the user with that id. None is CodeNotFound.
func (l *Ledger) UserByID(ctx context.Context, id string) (*User, error) {
	return l.takeUser(ctx, "id = ?", id)
}

func (l *Ledger) takeUser(ctx context.Context, where string, arg any) (*User, error) {
	var u User
	err := l.scope(ctx).Where(where, arg).Take(&u).Error
	if notFound(err) {
		return nil, errorf(CodeNotFound, "user not found")
	}
	if err != nil {
		return nil, unavailable("get user", err)
	}
	return &u, nil
}

// Users lists the users within scope s by email: every user for the unlimited scope; for a
// limited one, the users limited to some of its tenants (a tenant admin manages only the people
// of their tenants, and never sees an admin of every tenant).
func (l *Ledger) Users(ctx context.Context, s Scope) ([]User, error) {
	var all []User
	if err := l.scope(ctx).Order("email").Find(&all).Error; err != nil {
		return nil, unavailable("list users", err)
	}
	if s.Unlimited() {
		return all, nil
	}
	// Tenant lists are stored comma-separated, so the scope is applied here; users are few.
	out := []User{}
	for _, u := range all {
		if s.Covers(u.TenantList()) {
			out = append(out, u)
		}
	}
	return out, nil
}

// normalEmail checks that s is a bare address (no display name) and lower-cases it.
func normalEmail(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" || len(s) > 254 {
		return "", errorf(CodeInvalid, "email %q is not an address like name@example.com", s)
	}
	return s, nil
}

// normalTenants trims, drops empty names and duplicates, and sorts, so that the stored list is
// canonical.
func normalTenants(in []string) []string {
	var out []string
	for _, t := range in {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}
