package models

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
)

// LookAlikeWindow is how far before and after an operation's creation its look-alikes are
// looked for.
const LookAlikeWindow = 24 * time.Hour

// LookAlike is another operation of the same tenant, tool and params (the same fingerprint)
// made within LookAlikeWindow of one: what an agent that minted a second key for one intent
// leaves behind. idemgate does not merge them (two intentional payouts must not share a key);
// a reviewer is shown them, as the last defence.
type LookAlike struct {
	ID        string
	Key       string
	State     State
	CreatedAt time.Time
	// ApprovedBy are the people who approved it, in order.
	ApprovedBy []Person
}

// maxLookAlikes bounds what one page shows: the newest ones, and whether there were more.
const maxLookAlikes = 10

// LookAlikes returns op's look-alikes within s, newest first, at most ten, and whether there are
// more. The look-up is one probe of operations_lookalike (tenant, fingerprint, created_at).
func (l *Ledger) LookAlikes(ctx context.Context, s Scope, op *Operation) ([]LookAlike, bool, error) {
	db := l.scope(ctx)
	var rows []Operation
	err := lookAlikesOf(db, s, op).Select("id", "op_key", "state", "created_at").
		Order("created_at DESC").Limit(maxLookAlikes + 1).Find(&rows).Error
	if err != nil {
		return nil, false, unavailable("read look-alikes", err)
	}
	more := len(rows) > maxLookAlikes
	rows = rows[:min(len(rows), maxLookAlikes)]
	if len(rows) == 0 {
		return nil, false, nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	var evs []Event
	if err := db.Where("operation_id IN ? AND type = ?", ids, EventReviewAction).Order("id").Find(&evs).Error; err != nil {
		return nil, false, unavailable("read look-alikes' approvals", err)
	}
	approvers := map[string][]Person{}
	for _, e := range evs {
		var d struct{ Action string }
		if e.Detail == nil || json.Unmarshal([]byte(*e.Detail), &d) != nil || d.Action != ActionApprove {
			continue
		}
		if p := e.Person(); !p.Among(approvers[e.OperationID]) {
			approvers[e.OperationID] = append(approvers[e.OperationID], p)
		}
	}
	out := make([]LookAlike, len(rows))
	for i, r := range rows {
		out[i] = LookAlike{ID: r.ID, Key: r.Key, State: r.State, CreatedAt: r.CreatedAt, ApprovedBy: approvers[r.ID]}
	}
	return out, more, nil
}

// lookAlikesOf narrows db to op's look-alikes within s: a probe of operations_lookalike.
func lookAlikesOf(db *gorm.DB, s Scope, op *Operation) *gorm.DB {
	return s.apply(db.Model(&Operation{}), "tenant").
		Where("tenant = ? AND fingerprint = ? AND created_at >= ? AND created_at <= ? AND id <> ?",
			op.Tenant, op.Fingerprint, op.CreatedAt.Add(-LookAlikeWindow), op.CreatedAt.Add(LookAlikeWindow), op.ID)
}

// HasLookAlikes reports, of ops (a page of a queue), which have at least one look-alike within s:
// one index probe each.
func (l *Ledger) HasLookAlikes(ctx context.Context, s Scope, ops []*Operation) (map[string]bool, error) {
	out := map[string]bool{}
	db := l.scope(ctx)
	for _, op := range ops {
		var id string
		err := lookAlikesOf(db, s, op).Select("id").Limit(1).Scan(&id).Error
		if err != nil {
			return nil, unavailable(fmt.Sprintf("look for look-alikes of %s", op.ID), err)
		}
		if id != "" {
			out[op.ID] = true
		}
	}
	return out, nil
}

// LookAlikeGroups groups, of operations ids within s, those that share a tenant and fingerprint
// (the same tool and params under different keys): each group has two or more ids, in the
// order given.
func (l *Ledger) LookAlikeGroups(ctx context.Context, s Scope, ids []string) ([][]string, error) {
	if len(ids) < 2 {
		return nil, nil
	}
	var rows []struct{ ID, Tenant, Fingerprint string }
	for chunk := range slices.Chunk(ids, 500) {
		var part []struct{ ID, Tenant, Fingerprint string }
		if err := s.apply(l.scope(ctx).Model(&Operation{}), "tenant").Select("id", "tenant", "fingerprint").
			Where("id IN ?", chunk).Scan(&part).Error; err != nil {
			return nil, unavailable("read fingerprints", err)
		}
		rows = append(rows, part...)
	}
	of := map[string]string{}
	for _, r := range rows {
		of[r.ID] = r.Tenant + "\x00" + r.Fingerprint
	}
	members := map[string][]string{}
	var order []string
	for _, id := range ids {
		k, ok := of[id]
		if !ok {
			continue
		}
		if len(members[k]) == 0 {
			order = append(order, k)
		}
		members[k] = append(members[k], id)
	}
	var out [][]string
	for _, k := range order {
		if len(members[k]) > 1 {
			out = append(out, members[k])
		}
	}
	return out, nil
}
