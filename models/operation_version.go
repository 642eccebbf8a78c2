package models

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// OperationVersion is a short token that changes whenever what the console shows of an
// operation changes: its row (state, attempts, probes, review, compensation, last update) or
// its timeline (the count of its events, which approvals add without touching the row). The
// operation page asks for it to know when to show itself again. Outside scope is CodeNotFound.
func (l *Ledger) OperationVersion(ctx context.Context, s Scope, id string) (string, error) {
	var row struct {
		Tenant        string
		State         State
		Attempts      int
		Probes        int
		ReviewID      *string
		CompensatedBy *string
		UpdatedAt     time.Time
		Events        int64
	}
	err := l.scope(ctx).Raw(`SELECT o.tenant, o.state, o.attempts, o.probes, o.review_id, o.compensated_by, o.updated_at,
		(SELECT COUNT(*) FROM events e WHERE e.operation_id = o.id) AS events
		FROM operations o WHERE o.id = ?`, id).Scan(&row).Error
	if err != nil {
		return "", unavailable("operation version", err)
	}
	if row.Tenant == "" || !s.Allows(row.Tenant) {
		return "", errorf(CodeNotFound, "operation not found")
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%d|%v|%v|%d|%d", row.State, row.Attempts, row.Probes,
		deref(row.ReviewID), deref(row.CompensatedBy), row.UpdatedAt.UnixNano(), row.Events))
	return hex.EncodeToString(sum[:8]), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
