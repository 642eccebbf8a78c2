package models

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// Admin changes (tenants, API keys, users) are made within the requester's scope and write
// their audit entry in the same transaction as the change: no change commits without its
// entry, and no entry records a change that did not commit.

// entry is the audit entry of a change by r.
func (r Requester) entry(action, tenant string, detail map[string]any) AuditInput {
	return AuditInput{Actor: r.Actor, Action: action, Tenant: tenant, Outcome: OutcomeOK, RequestID: r.RequestID, Detail: detail}
}

// CreateTenant records a new tenant. Only the unlimited scope may: a tenant admin could not
// see it. An existing name is CodeConflict.
func (l *Ledger) CreateTenant(ctx context.Context, s Scope, by Requester, name string) (*Tenant, error) {
	if !s.Unlimited() {
		return nil, errorf(CodeInvalid, "only an admin of every tenant can create tenants")
	}
	if !nameRE.MatchString(name) {
		return nil, errorf(CodeInvalid, "tenant name %q: use 1–63 lower-case letters, digits, '.', '_' or '-'", name)
	}
	now := l.clock()
	t := &Tenant{Name: name, CreatedAt: now}
	err := l.txn(ctx, "create tenant", func(tx *gorm.DB) ([]string, error) {
		if err := tx.Create(t).Error; err != nil {
			return nil, err
		}
		_, err := l.appendAudit(tx, now, by.entry(AuditTenantCreate, name, nil))
		return nil, err
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return nil, errorf(CodeConflict, "tenant %q already exists", name)
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// NewKey is a freshly created API key: Secret is shown once and never stored.
type NewKey struct {
	Secret string
	Key    APIKey
}

// CreateAPIKey creates a key for principal (created on first use) of tenant within scope s,
// allowed tools (nil or ["*"] for all). A tenant outside s is CodeNotFound, as a missing one.
func (l *Ledger) CreateAPIKey(ctx context.Context, s Scope, by Requester, tenant, principal string, tools []string) (*NewKey, error) {
	if !s.Allows(tenant) {
		return nil, errorf(CodeNotFound, "tenant %q does not exist", tenant)
	}
	if !nameRE.MatchString(principal) {
		return nil, errorf(CodeInvalid, "principal name %q: use 1–63 lower-case letters, digits, '.', '_' or '-'", principal)
	}
	list := "*"
	if len(tools) > 0 {
		for i := range tools {
			tools[i] = strings.TrimSpace(tools[i])
		}
		list = strings.Join(tools, ",")
	}
	secret, err := newAPIKey()
	if err != nil {
		return nil, fmt.Errorf("ledger: generate key: %w", err)
	}
	now := l.clock()
	key := APIKey{ID: newID("key"), Tenant: tenant, Prefix: secret[:APIKeyPrefixLen], Hash: HashAPIKey(secret), Tools: list, CreatedAt: now}
	err = l.txn(ctx, "create api key", func(tx *gorm.DB) ([]string, error) {
		if err := tx.Where("name = ?", tenant).Take(&Tenant{}).Error; err != nil {
			if notFound(err) {
				return nil, errorf(CodeNotFound, "tenant %q does not exist", tenant)
			}
			return nil, err
		}
		p := Principal{ID: newID("prn"), Tenant: tenant, Name: principal, CreatedAt: now}
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&p).Error; err != nil {
			return nil, err
		}
		// Read back whichever principal holds the name (ours, or one created before); a
		// fresh struct, or GORM would add our unused id to the conditions.
		p = Principal{}
		if err := tx.Where("tenant = ? AND name = ?", tenant, principal).Take(&p).Error; err != nil {
			return nil, err
		}
		key.PrincipalID = p.ID
		if err := tx.Create(&key).Error; err != nil {
			return nil, err
		}
		_, err := l.appendAudit(tx, now, by.entry(AuditAPIKeyCreate, tenant,
			map[string]any{"key_id": key.ID, "prefix": key.Prefix, "principal": principal, "tools": key.Tools}))
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	return &NewKey{Secret: secret, Key: key}, nil
}

// RevokeAPIKey revokes the one key within scope s whose stored prefix starts with prefix. No
// match is CodeNotFound; several are CodeInvalid (give more characters).
func (l *Ledger) RevokeAPIKey(ctx context.Context, s Scope, by Requester, prefix string) (*APIKey, error) {
	if len(prefix) < 8 {
		return nil, errorf(CodeInvalid, "give at least 8 characters of the key")
	}
	if len(prefix) > APIKeyPrefixLen {
		prefix = prefix[:APIKeyPrefixLen]
	}
	var keys []APIKey
	// An exact, case-sensitive comparison: LIKE differs between engines ('_' wildcards,
	// SQLite's case folding) and could match the wrong key.
	q := s.apply(l.scope(ctx), "tenant").Where("substr(prefix, 1, ?) = ? AND revoked_at IS NULL", len(prefix), prefix)
	if err := q.Find(&keys).Error; err != nil {
		return nil, unavailable("find api key", err)
	}
	switch {
	case len(keys) == 0:
		return nil, errorf(CodeNotFound, "no active API key starts with %q", prefix)
	case len(keys) > 1:
		return nil, errorf(CodeInvalid, "%d keys start with %q; give more characters", len(keys), prefix)
	}
	k := keys[0]
	revoked, err := l.revokeKey(ctx, by, &k)
	if err != nil {
		return nil, err
	}
	if !revoked {
		return nil, errorf(CodeNotFound, "no active API key starts with %q", prefix)
	}
	return &k, nil
}

// Caller is an authenticated API principal.
type Caller struct {
	Tenant        string
	PrincipalID   string
	PrincipalName string
	Key           APIKey
}

// Actor is how the caller appears on timelines.
func (c *Caller) Actor() string { return "api:" + c.PrincipalName }

// AllowsTool reports whether the caller's key may use the named tool.
func (c *Caller) AllowsTool(name string) bool { return c.Key.AllowsTool(name) }

// KeyActive reports whether API key id is still unrevoked, read from the ledger itself (not the
// key cache): for an answer given long after the request was authenticated.
func (l *Ledger) KeyActive(ctx context.Context, id string) (bool, error) {
	var n int64
	if err := l.scope(ctx).Model(&APIKey{}).Where("id = ? AND revoked_at IS NULL", id).Count(&n).Error; err != nil {
		return false, unavailable("read api key", err)
	}
	return n == 1, nil
}

// Authenticate resolves a bearer key. Unknown, malformed and revoked keys are all
// CodeNotFound, so a caller cannot tell them apart.
func (l *Ledger) Authenticate(ctx context.Context, secret string) (*Caller, error) {
	if !WellFormedAPIKey(secret) {
		return nil, errorf(CodeNotFound, "unknown API key")
	}
	hash := HashAPIKey(secret)
	caller, gen := l.keys.get(hash)
	if caller != nil {
		return caller, nil
	}
	var row struct {
		APIKey
		PrincipalName string
	}
	err := l.scope(ctx).Table("api_keys").
		Select("api_keys.*, principals.name AS principal_name").
		Joins("JOIN principals ON principals.id = api_keys.principal_id").
		Where("api_keys.hash = ? AND api_keys.revoked_at IS NULL", hash).
		Take(&row).Error
	if notFound(err) {
		return nil, errorf(CodeNotFound, "unknown API key")
	}
	if err != nil {
		return nil, unavailable("authenticate", err)
	}
	caller = &Caller{Tenant: row.Tenant, PrincipalID: row.PrincipalID, PrincipalName: row.PrincipalName, Key: row.APIKey}
	if err := l.noteKeyUse(ctx, &row.APIKey); err != nil {
		return nil, err
	}
	l.keys.put(hash, gen, caller)
	return caller, nil
}

// keyUseResolution is how fresh a key's last use is kept: its row is written at most once a
// resolution, however busy the key, so that the hot path pays for it about once a minute.
const keyUseResolution = time.Minute

// noteKeyUse records that k authenticated a request now, when its recorded last use is older
// than keyUseResolution. It runs only when the key is read from the database (the key cache
// answers the rest), and the condition in the UPDATE keeps replicas from writing it twice.
func (l *Ledger) noteKeyUse(ctx context.Context, k *APIKey) error {
	now := l.clock()
	if k.LastUsedAt != nil && now.Sub(*k.LastUsedAt) < keyUseResolution {
		return nil
	}
	err := l.scope(ctx).Model(&APIKey{}).
		Where("id = ? AND (last_used_at IS NULL OR last_used_at < ?)", k.ID, now.Add(-keyUseResolution)).
		Update("last_used_at", now).Error
	if err != nil {
		return unavailable("note api key use", err)
	}
	return nil
}

// revokeKey marks k revoked (when still active), with its audit entry, and makes every replica
// forget it: this one at once, the others through a notification sent when the revocation
// commits. It reports whether this call revoked it, and then sets k.RevokedAt.
func (l *Ledger) revokeKey(ctx context.Context, by Requester, k *APIKey) (bool, error) {
	var revoked bool
	now := l.clock()
	err := l.txn(ctx, "revoke api key", func(tx *gorm.DB) ([]string, error) {
		res := tx.Model(&APIKey{}).Where("id = ? AND revoked_at IS NULL", k.ID).Update("revoked_at", now)
		if res.Error != nil {
			return nil, res.Error
		}
		if revoked = res.RowsAffected == 1; !revoked {
			return nil, nil
		}
		if _, err := l.appendAudit(tx, now, by.entry(AuditAPIKeyRevoke, k.Tenant,
			map[string]any{"key_id": k.ID, "prefix": k.Prefix})); err != nil {
			return nil, err
		}
		if l.dialect == Postgres {
			return nil, tx.Exec("SELECT pg_notify(?, ?)", keysChannel, k.ID).Error
		}
		return nil, nil
	})
	if err != nil {
		return false, err
	}
	l.keys.forget(k.ID)
	if revoked {
		k.RevokedAt = &now
	}
	return revoked, nil
}

// Setting returns a stored setting, or "" when unset.
func (l *Ledger) Setting(ctx context.Context, name string) (string, error) {
	var v []string
	if err := l.scope(ctx).Table("settings").Where("name = ?", name).Pluck("value", &v).Error; err != nil {
		return "", unavailable("read setting", err)
	}
	if len(v) == 0 {
		return "", nil
	}
	return v[0], nil
}

// EnsureSetting stores value under name unless one is already stored, and returns the stored
// value: two replicas starting at once agree on one.
func (l *Ledger) EnsureSetting(ctx context.Context, name, value string) (string, error) {
	err := l.scope(ctx).Table("settings").Clauses(clause.OnConflict{DoNothing: true}).
		Create(map[string]any{"name": name, "value": value}).Error
	if err != nil {
		return "", unavailable("write setting", err)
	}
	return l.Setting(ctx, name)
}
