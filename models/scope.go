package models

import (
	"context"
	"slices"

	"gorm.io/gorm"
)

// Scope is the part of the ledger a console user may see and change: the tenants they are
// limited to, or every tenant. Every console read and change takes one, so that a record
// outside it is answered exactly like a missing one.
//
// The zero Scope sees nothing and may change nothing: a caller that forgot to pass the user's
// scope fails closed, never open. Full access is asked for by name, with AllTenants.
type Scope struct {
	all     bool
	tenants []string
}

// AllTenants is the scope of a user limited to no tenant, and of the command line: every
// tenant.
func AllTenants() Scope { return Scope{all: true} }

// OnlyTenants is the scope of a user limited to the named tenants. With no names it sees
// nothing, like the zero Scope.
func OnlyTenants(names ...string) Scope {
	var s Scope
	for _, n := range names {
		if n != "" && !slices.Contains(s.tenants, n) {
			s.tenants = append(s.tenants, n)
		}
	}
	return s
}

// Allows reports whether tenant is within the scope.
func (s Scope) Allows(tenant string) bool {
	return s.all || (tenant != "" && slices.Contains(s.tenants, tenant))
}

// Unlimited reports whether the scope covers every tenant.
func (s Scope) Unlimited() bool { return s.all }

// Tenants lists the tenants of a limited scope; nil for the unlimited scope, which names none.
func (s Scope) Tenants() []string {
	if s.all {
		return nil
	}
	return slices.Clone(s.tenants)
}

// Covers reports whether list names at least one tenant and every one is within the scope:
// whether a user limited to list would see no more than this scope does.
func (s Scope) Covers(list []string) bool {
	return len(list) > 0 && !slices.ContainsFunc(list, func(t string) bool { return !s.Allows(t) })
}

// apply narrows q to the scope on the given tenant column.
func (s Scope) apply(q *gorm.DB, column string) *gorm.DB {
	switch {
	case s.all:
		return q
	case len(s.tenants) == 0:
		// "IN ()" is not SQL; a condition no row meets is. (Not an empty name in the list:
		// audit entries without a tenant have one.)
		return q.Where("1 = 0")
	}
	return q.Where(column+" IN ?", s.tenants)
}

// ScopedTenants lists the tenants within scope, by name.
func (l *Ledger) ScopedTenants(ctx context.Context, s Scope) ([]Tenant, error) {
	var out []Tenant
	if err := s.apply(l.scope(ctx), "name").Order("name").Find(&out).Error; err != nil {
		return nil, unavailable("list tenants", err)
	}
	return out, nil
}
