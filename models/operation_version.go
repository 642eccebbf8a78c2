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
	return versionOf(row.State, row.Attempts, row.Probes, row.ReviewID, row.CompensatedBy, row.UpdatedAt, row.Events), nil
}

// Version is OperationVersion of the operation as this record holds it: the page rendered from
// the record carries the version of what it shows, so a change made while it was read is seen
// at the page's first check, never taken as already shown.
func (r *OperationRecord) Version() string {
	op := r.Op
	return versionOf(op.State, op.Attempts, op.Probes, op.ReviewID, op.CompensatedBy, op.UpdatedAt, int64(len(r.Events)))
}

func versionOf(state State, attempts, probes int, reviewID, compensatedBy *string, updated time.Time, events int64) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%d|%v|%v|%d|%d", state, attempts, probes,
		deref(reviewID), deref(compensatedBy), updated.UnixNano(), events))
	return hex.EncodeToString(sum[:8])
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
