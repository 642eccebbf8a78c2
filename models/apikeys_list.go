package models

import (
	"context"
	"time"
)

// APIKeyRow is an API key as the admin pages list it: never its secret or hash.
type APIKeyRow struct {
	ID            string
	Tenant        string
	Prefix        string
	PrincipalName string
	Tools         string
	CreatedAt     time.Time
	RevokedAt     *time.Time
	LastUsedAt    *time.Time
}

// APIKeys lists the API keys within scope, of tenant when not "", by tenant and newest first.
func (l *Ledger) APIKeys(ctx context.Context, s Scope, tenant string) ([]APIKeyRow, error) {
	q := l.scope(ctx).Table("api_keys").
		Select("api_keys.id, api_keys.tenant, api_keys.prefix, principals.name AS principal_name, " +
			"api_keys.tools, api_keys.created_at, api_keys.revoked_at, api_keys.last_used_at").
		Joins("JOIN principals ON principals.id = api_keys.principal_id")
	q = s.apply(q, "api_keys.tenant")
	if tenant != "" {
		q = q.Where("api_keys.tenant = ?", tenant)
	}
	var out []APIKeyRow
	if err := q.Order("api_keys.tenant, api_keys.created_at DESC, api_keys.id DESC").Scan(&out).Error; err != nil {
		return nil, unavailable("list api keys", err)
	}
	return out, nil
}

// RevokeAPIKeyByID revokes the key id within scope. A key outside scope is CodeNotFound; one
// already revoked is CodeConflict.
func (l *Ledger) RevokeAPIKeyByID(ctx context.Context, s Scope, by Requester, id string) (*APIKey, error) {
	var k APIKey
	err := s.apply(l.scope(ctx), "tenant").Where("id = ?", id).Take(&k).Error
	if notFound(err) {
		return nil, errorf(CodeNotFound, "API key not found")
	}
	if err != nil {
		return nil, unavailable("get api key", err)
	}
	revoked, err := l.revokeKey(ctx, by, &k)
	if err != nil {
		return nil, err
	}
	if !revoked {
		return nil, errorf(CodeConflict, "API key %s… is already revoked", k.Prefix)
	}
	return &k, nil
}
