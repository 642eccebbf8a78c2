package models

import (
	"context"

	"gorm.io/gorm"
)

// Test-only views of unexported names, for the external tests of this package.

// OperationColumns is operationColumns.
const OperationColumns = operationColumns

// OperationsRows is operationsRows: the table's row count in PostgreSQL's statistics.
func (l *Ledger) OperationsRows(ctx context.Context) (float64, error) { return l.operationsRows(ctx) }

// KeyLookupSQL is the key look-up in PostgreSQL's spelling.
var KeyLookupSQL = getOperationByKey.numbered

// SearchSQL is the statement SearchOperations sends for f within s, with its values inlined.
func (l *Ledger) SearchSQL(s Scope, f Search) string {
	return l.db.ToSQL(func(tx *gorm.DB) *gorm.DB {
		var ops []*Operation
		return l.whereSearch(s.apply(tx, "tenant"), f).Order("id DESC").Limit(f.Limit + 1).Find(&ops)
	})
}
