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

// PauseGroupCommit holds every claim and outcome that arrives from now on until resume, which
// sends each kind's held requests as one batch (groupcommit.go). Nil-safe on SQLite.
func (l *Ledger) PauseGroupCommit() (resume func()) {
	if l.batch == nil {
		return func() {}
	}
	claims, outcomes := l.batch.claims.Pause(), l.batch.outcomes.Pause()
	return func() { claims(); outcomes() }
}

// GroupCommitQueued says how many claims and outcomes wait for a batch.
func (l *Ledger) GroupCommitQueued() (claims, outcomes int) {
	return l.batch.claims.Queued(), l.batch.outcomes.Queued()
}

// GroupCommitStats says how many batches of claims and of outcomes ran, and how many requests
// they held.
func (l *Ledger) GroupCommitStats() (claimBatches, claims, outcomeBatches, outcomes uint64) {
	claimBatches, claims = l.batch.claims.Stats()
	outcomeBatches, outcomes = l.batch.outcomes.Stats()
	return
}
