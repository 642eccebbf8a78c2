package models

import (
	"context"
	"slices"
)

// StoredParams returns the params of the operations ids within s, as stored (masked where
// sealed; absent where purged), by id: what a page shows once masked with the tool's rules.
func (l *Ledger) StoredParams(ctx context.Context, s Scope, ids []string) (map[string]string, error) {
	return l.columnByID(ctx, s, ids, "params", "read params")
}

// DownstreamKeysOf returns the downstream keys sent for the operations ids within s, by id
// (the operation's id for one recorded before downstream keys: Operation.DownstreamKeySent).
func (l *Ledger) DownstreamKeysOf(ctx context.Context, s Scope, ids []string) (map[string]string, error) {
	out, err := l.columnByID(ctx, s, ids, "downstream_key", "read downstream keys")
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			out[id] = id
		}
	}
	return out, nil
}

// KeysOf returns the keys of the operations ids within s, by id: how a page names an
// operation it only links to (the one a compensation undoes).
func (l *Ledger) KeysOf(ctx context.Context, s Scope, ids []string) (map[string]string, error) {
	return l.columnByID(ctx, s, ids, "op_key", "read operation keys")
}

// columnByID reads one text column (a constant of this package, never input) of the
// operations ids within s, in chunks a statement's parameters can hold; NULLs are left out.
func (l *Ledger) columnByID(ctx context.Context, s Scope, ids []string, column, what string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	for chunk := range slices.Chunk(ids, 500) {
		var rows []struct {
			ID    string
			Value *string
		}
		err := s.apply(l.scope(ctx).Model(&Operation{}), "tenant").Select("id, "+column+" AS value").
			Where("id IN ?", chunk).Find(&rows).Error
		if err != nil {
			return nil, unavailable(what, err)
		}
		for _, r := range rows {
			if r.Value != nil {
				out[r.ID] = *r.Value
			}
		}
	}
	return out, nil
}
