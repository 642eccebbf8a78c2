package models

import (
	"context"
	"slices"

	"gorm.io/gorm"
)

// Scope is the part of the ledger a console user may see: the tenants they are limited to.
// Every console read takes one, so that a record outside it is answered exactly like a missing
// one.
type Scope struct {
	// Tenants lists the visible tenants; nil means every tenant. A non-nil empty list sees
	// nothing.
	Tenants []string
}

// Allows reports whether tenant is within the scope.
func (s Scope) Allows(tenant string) bool {
	return s.Tenants == nil || slices.Contains(s.Tenants, tenant)
}

// Unlimited reports whether the scope covers every tenant.
func (s Scope) Unlimited() bool { return s.Tenants == nil }

// apply narrows q to the scope on the given tenant column.
func (s Scope) apply(q *gorm.DB, column string) *gorm.DB {
	if s.Tenants == nil {
		return q
	}
	// The empty name keeps the list non-empty (no tenant has it), so "IN ()" is never sent.
	return q.Where(column+" IN ?", append([]string{""}, s.Tenants...))
}

// ScopedTenants lists the tenants within scope, by name.
func (l *Ledger) ScopedTenants(ctx context.Context, s Scope) ([]Tenant, error) {
	var out []Tenant
	if err := s.apply(l.scope(ctx), "name").Order("name").Find(&out).Error; err != nil {
		return nil, unavailable("list tenants", err)
	}
	return out, nil
}
