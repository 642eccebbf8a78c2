package models

import (
	"context"
)

// UnsentAttempts counts the attempts of operation id that sent nothing (class not_sent): they
// count against the tool's retry.unsent_for, not its max_attempts (docs/STATES.md).
func (l *Ledger) UnsentAttempts(ctx context.Context, id string) (int, error) {
	var n int64
	if err := l.scope(ctx).Table("attempts").Where("operation_id = ? AND class = ?", id, "not_sent").Count(&n).Error; err != nil {
		return 0, unavailable("count unsent attempts of "+id, err)
	}
	return int(n), nil
}
