package models

import (
	"context"
	"fmt"
)

// OperationRecord is everything the console shows about one operation.
type OperationRecord struct {
	Op       *Operation
	Events   []Event
	Attempts []Attempt
	Reviews  []Review // oldest first
	// Audit lists the audit log's entries about the operation, oldest first.
	Audit []AuditEntry
	// Compensates and CompensatedBy are the linked operations, when there are.
	Compensates   *Operation
	CompensatedBy *Operation
}

// OperationRecord returns operation id with its timeline, attempts, reviews and linked
// operations. An operation outside scope is CodeNotFound, exactly as a missing one.
func (l *Ledger) OperationRecord(ctx context.Context, s Scope, id string) (*OperationRecord, error) {
	db := l.scope(ctx)
	var op Operation
	err := s.apply(db, "tenant").Where("id = ?", id).Take(&op).Error
	if notFound(err) {
		return nil, errorf(CodeNotFound, "operation not found")
	}
	if err != nil {
		return nil, unavailable("get operation "+id, err)
	}
	rec := &OperationRecord{Op: &op}
	if err := l.loadReviews(ctx, []*Operation{&op}); err != nil {
		return nil, err
	}
	if err := attachPolicy(db, &op); err != nil { // a rule's own count of approvals
		return nil, unavailable("policy of "+id, err)
	}
	if err := db.Where("operation_id = ?", id).Order("id").Find(&rec.Events).Error; err != nil {
		return nil, unavailable(fmt.Sprintf("events of %s", id), err)
	}
	if err := db.Where("operation_id = ?", id).Order("number").Find(&rec.Attempts).Error; err != nil {
		return nil, unavailable(fmt.Sprintf("attempts of %s", id), err)
	}
	if err := db.Where("operation_id = ?", id).Order("opened_at, id").Find(&rec.Reviews).Error; err != nil {
		return nil, unavailable(fmt.Sprintf("reviews of %s", id), err)
	}
	if err := db.Where("operation_id = ? AND tenant = ?", id, op.Tenant).Order("seq").Find(&rec.Audit).Error; err != nil {
		return nil, unavailable(fmt.Sprintf("audit entries of %s", id), err)
	}
	for _, link := range []struct {
		id  *string
		dst **Operation
	}{{op.Compensates, &rec.Compensates}, {op.CompensatedBy, &rec.CompensatedBy}} {
		if link.id == nil {
			continue
		}
		var linked []*Operation
		// Links never cross tenants; the tenant condition only makes sure of it.
		if err := db.Where("id = ? AND tenant = ?", *link.id, op.Tenant).Limit(1).Find(&linked).Error; err != nil {
			return nil, unavailable("linked operation", err)
		}
		if len(linked) == 1 {
			*link.dst = linked[0]
		}
	}
	return rec, nil
}
