package models

import (
	"context"

	"gorm.io/gorm"
)

// TransitionForTest writes one transition of op, from → to, through the ledger's one
// compare-and-set (transition), fenced by fence when it is not zero, in a transaction of its
// own. For tests of the state machine itself: the exported functions each ask only for the
// transitions their rule allows.
func (l *Ledger) TransitionForTest(ctx context.Context, op *Operation, from, to State, fence int64) error {
	return l.txn(ctx, "test transition", func(tx *gorm.DB) ([]string, error) {
		return []string{op.ID}, l.transition(tx, l.clock(), op, change{from: from, to: to, fence: fence, actor: "test"})
	})
}
