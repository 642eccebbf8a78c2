package models

import (
	"context"
	"database/sql"
	"time"

	"gorm.io/gorm"
)

// ExportFilter selects the operations an export reads, within the caller's scope. Zero fields
// do not filter.
type ExportFilter struct {
	// Tenant narrows the export to one tenant (within the scope).
	Tenant string
	// From and To bound created_at: From inclusive, To exclusive.
	From, To time.Time
	State    State
	Tool     string
}

// ExportedOperation is one operation with its whole timeline, as an export writes it.
type ExportedOperation struct {
	Op       *Operation
	Events   []Event   // in order
	Attempts []Attempt // by number
}

// MaxExportBatch bounds one batch, so that an export's memory stays constant.
const MaxExportBatch = 5000

// ExportBatch returns up to limit operations within scope s matching f whose id is greater than afterID, in
// id order, each with its events and attempts. Callers page by passing the last id they got
// ("" to start) until a batch comes back shorter than limit. Each batch is read in one short
// read-only transaction, so an operation and its timeline are consistent with each other; the
// connection is released between batches, so a long export never holds the database.
func (l *Ledger) ExportBatch(ctx context.Context, s Scope, f ExportFilter, afterID string, limit int) ([]ExportedOperation, error) {
	if limit <= 0 || limit > MaxExportBatch {
		return nil, errorf(CodeInvalid, "export batch size must be between 1 and %d", MaxExportBatch)
	}
	var out []ExportedOperation
	err := l.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var ops []*Operation
		if err := exportQuery(tx, s, f, afterID).Order("id").Limit(limit).Find(&ops).Error; err != nil {
			return err
		}
		if len(ops) == 0 {
			return nil
		}
		if err := attachReviews(tx, ops); err != nil {
			return err
		}
		if err := attachPolicies(tx, ops); err != nil {
			return err
		}
		var err error
		out, err = attachTimelines(tx, ops)
		return err
	}, l.snapshotTx())
	if err != nil {
		return nil, unavailable("export batch after "+afterID, err)
	}
	if out == nil {
		out = []ExportedOperation{}
	}
	return out, nil
}

// exportQuery applies the scope, the filter and the keyset position.
func exportQuery(tx *gorm.DB, s Scope, f ExportFilter, afterID string) *gorm.DB {
	q := s.apply(tx, "tenant").Where("id > ?", afterID)
	return whereOperations(q, f.Tenant, f.Tool, f.State, f.From, f.To)
}

// attachTimelines reads the events and attempts of ops with one IN query each.
func attachTimelines(tx *gorm.DB, ops []*Operation) ([]ExportedOperation, error) {
	ids := make([]string, len(ops))
	out := make([]ExportedOperation, len(ops))
	index := make(map[string]int, len(ops))
	for i, op := range ops {
		ids[i], index[op.ID] = op.ID, i
		out[i].Op = op
	}
	err := scanEvents(tx, ids, func(e Event) {
		i := index[e.OperationID]
		out[i].Events = append(out[i].Events, e)
	})
	if err != nil {
		return nil, err
	}
	var attempts []Attempt
	if err := tx.Where("operation_id IN ?", ids).Order("operation_id, number").Find(&attempts).Error; err != nil {
		return nil, err
	}
	for _, a := range attempts {
		i := index[a.OperationID]
		out[i].Attempts = append(out[i].Attempts, a)
	}
	return out, nil
}

// snapshotTx asks for one snapshot across a batch's statements: REPEATABLE READ on
// PostgreSQL (READ COMMITTED would give each statement its own); an SQLite transaction in WAL
// mode reads one snapshot already.
func (l *Ledger) snapshotTx() *sql.TxOptions {
	if l.dialect == Postgres {
		return &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	}
	return &sql.TxOptions{ReadOnly: true}
}

// scanEvents reads the events of the operations ids in order, scanning rows by hand: events are
// most of an export's rows, and GORM's reflective scan was half of its time.
func scanEvents(tx *gorm.DB, ids []string, fn func(Event)) error {
	rows, err := tx.Raw(`SELECT id, operation_id, tenant, at, type, from_state, to_state, attempt, actor, detail
		FROM events WHERE operation_id IN ? ORDER BY operation_id, id`, ids).Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var e Event
		var from, to, detail sql.NullString
		var attempt sql.NullInt64
		if err := rows.Scan(&e.ID, &e.OperationID, &e.Tenant, &e.At, &e.Type, &from, &to, &attempt, &e.Actor, &detail); err != nil {
			return err
		}
		if from.Valid {
			e.FromState = ptr(State(from.String))
		}
		if to.Valid {
			e.ToState = ptr(State(to.String))
		}
		if attempt.Valid {
			e.Attempt = ptr(int(attempt.Int64))
		}
		if detail.Valid {
			e.Detail = ptr(detail.String)
		}
		fn(e)
	}
	return rows.Err()
}
