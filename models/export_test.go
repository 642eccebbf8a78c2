package models

import "context"

// Test-only views of unexported names, for the external tests of this package.

// OperationColumns is operationColumns.
const OperationColumns = operationColumns

// OperationsRows is operationsRows: the table's row count in PostgreSQL's statistics.
func (l *Ledger) OperationsRows(ctx context.Context) (float64, error) { return l.operationsRows(ctx) }

// KeyLookupSQL is the key look-up in PostgreSQL's spelling.
var KeyLookupSQL = getOperationByKey.numbered
