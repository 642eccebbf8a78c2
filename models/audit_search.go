package models

import (
	"context"
	"strings"
	"unicode/utf8"
)

// AuditSearch narrows the console's audit log page. Zero fields do not filter.
type AuditSearch struct {
	Tenant string
	// Action matches an action exactly, or a family by its first part: "review" matches
	// review.approve, review.reject and the rest.
	Action string
	// Actor matches an actor exactly; an address without a kind ("rita@example.com") also
	// matches the console user user:rita@example.com.
	Actor  string
	Before int64 // cursor: entries with a lower sequence number
	Limit  int
}

// AuditEntries returns a page of the audit log within scope, newest first, and whether more
// follow. A scope limited to tenants sees only those tenants' entries: entries without a tenant
// (sign-ins, tenant creation, refused anonymous requests) are visible to unlimited users only.
func (l *Ledger) AuditEntries(ctx context.Context, s Scope, f AuditSearch) ([]AuditEntry, bool, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		return nil, false, errorf(CodeInvalid, "limit must be between 1 and 500")
	}
	// Entries without a tenant are kept out of a limited scope by the same IN as any other.
	q := s.apply(l.scope(ctx), "tenant")
	if f.Tenant != "" {
		q = q.Where("tenant = ?", f.Tenant)
	}
	if a := strings.TrimSpace(f.Action); a != "" {
		family := strings.TrimSuffix(a, ".") + "."
		// An exact, case-sensitive prefix on both engines (LIKE folds case on SQLite and
		// treats '_' as a wildcard, and actions contain '_').
		q = q.Where("action = ? OR substr(action, 1, ?) = ?", a, utf8.RuneCountInString(family), family)
	}
	if a := strings.TrimSpace(f.Actor); a != "" {
		actors := []string{a}
		if !strings.Contains(a, ":") {
			actors = append(actors, "user:"+strings.ToLower(a))
		}
		q = q.Where("actor IN ?", actors)
	}
	if f.Before > 0 {
		q = q.Where("seq < ?", f.Before)
	}
	var out []AuditEntry
	if err := q.Order("seq DESC").Limit(f.Limit + 1).Find(&out).Error; err != nil {
		return nil, false, unavailable("list audit entries", err)
	}
	more := len(out) > f.Limit
	if more {
		out = out[:f.Limit]
	}
	return out, more, nil
}
