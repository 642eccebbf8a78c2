package models

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// OperationVersion is a short token that changes whenever what the console shows of an
// operation changes: its row (state, attempts, probes, review, compensation, last update) or
// its timeline (the count of its events, which approvals add without touching the row). The
// operation page asks for it to know when to show itself again. Outside scope is CodeNotFound.
func (l *Ledger) OperationVersion(ctx context.Context, s Scope, id string) (string, error) {
	var row versionedRow
	err := l.scope(ctx).Raw(`SELECT o.tenant, o.state, o.attempts, o.probes, o.review_id, o.compensated_by, o.updated_at,
		(SELECT COUNT(*) FROM events e WHERE e.operation_id = o.id) AS events
		FROM operations o WHERE o.id = ?`, id).Scan(&row).Error
	if err != nil {
		return "", unavailable("operation version", err)
	}
	if row.Tenant == "" || !s.Allows(row.Tenant) {
		return "", errorf(CodeNotFound, "operation not found")
	}
	return row.version(), nil
}

// versionedRow is what of an operation its versions cover, and the row's id and tenant: the
// row, and the count of its events where they are covered (OperationVersion).
type versionedRow struct {
	ID            string
	Tenant        string
	Events        int64
	State         State
	Attempts      int
	Probes        int
	ReviewID      *string
	CompensatedBy *string
	UpdatedAt     time.Time
}

func (r versionedRow) version() string {
	return versionOf(r.State, r.Attempts, r.Probes, r.ReviewID, r.CompensatedBy, r.UpdatedAt, r.Events)
}

// Version is OperationVersion of the operation as this record holds it: the page rendered from
// the record carries the version of what it shows, so a change made while it was read is seen
// at the page's first check, never taken as already shown.
func (r *OperationRecord) Version() string {
	op := r.Op
	return versionOf(op.State, op.Attempts, op.Probes, op.ReviewID, op.CompensatedBy, op.UpdatedAt, int64(len(r.Events)))
}

// OperationStates returns the states of the operations ids within s, by id, and a version of
// them all that changes whenever the row of one of them does (state, attempts, look-ups,
// review, compensation, last update): what a page listing many operations, a bulk decision's
// result, asks to know when to show itself again. Unlike OperationVersion it does not count
// events: such a page shows the rows, not the timelines. Ids outside s are left out of both.
func (l *Ledger) OperationStates(ctx context.Context, s Scope, ids []string) (map[string]State, string, error) {
	var rows []versionedRow
	for chunk := range slices.Chunk(ids, 500) {
		var part []versionedRow
		q := s.apply(l.scope(ctx).Table("operations"), "tenant").
			Select("id, state, attempts, probes, review_id, compensated_by, updated_at").Where("id IN ?", chunk)
		if err := q.Scan(&part).Error; err != nil {
			return nil, "", unavailable("read operation states", err)
		}
		rows = append(rows, part...)
	}
	slices.SortFunc(rows, func(a, b versionedRow) int { return strings.Compare(a.ID, b.ID) })
	states := make(map[string]State, len(rows))
	sum := sha256.New()
	for _, r := range rows {
		states[r.ID] = r.State
		fmt.Fprintf(sum, "%s:%s\n", r.ID, r.version())
	}
	return states, hex.EncodeToString(sum.Sum(nil)[:8]), nil
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
