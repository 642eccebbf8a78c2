package models

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// LookAlikeRule says what makes two operations of a tool look alike (the tool's
// review.lookalike_on and review.lookalike_window, docs/TOOLS.md): the params at On (JSON
// pointers) being equal, whatever the others say; with On empty, all of them (the same
// fingerprint). Window is how far before and after one the other was made; 0 means
// LookAlikeWindow.
type LookAlikeRule struct {
	On     []string
	Window time.Duration
}

func (r LookAlikeRule) window() time.Duration {
	if r.Window <= 0 {
		return LookAlikeWindow
	}
	return r.Window
}

// maxLookAlikeScan bounds how many operations of the tool one look-up by lookalike_on reads
// (the newest within the window): those params are compared one by one, sealed ones opened.
const maxLookAlikeScan = 500

// LookAlikes returns op's look-alikes by the same fingerprint within LookAlikeWindow (see
// LookAlikesBy).
func (l *Ledger) LookAlikes(ctx context.Context, s Scope, op *Operation) ([]LookAlike, bool, error) {
	return l.LookAlikesBy(ctx, s, op, LookAlikeRule{})
}

// LookAlikesBy returns op's look-alikes by rule within s, newest first, at most ten, and
// whether there are more. By fingerprint the look-up is one probe of operations_lookalike
// (tenant, fingerprint, created_at); by lookalike_on it reads the tool's operations of the
// window (operations_created), at most maxLookAlikeScan of them, and compares their params.
func (l *Ledger) LookAlikesBy(ctx context.Context, s Scope, op *Operation, rule LookAlikeRule) ([]LookAlike, bool, error) {
	db := l.scope(ctx)
	var rows []Operation
	if len(rule.On) == 0 {
		err := lookAlikesOf(db, s, op, rule.window()).Select("id", "op_key", "state", "created_at").
			Order("created_at DESC").Limit(maxLookAlikes + 1).Find(&rows).Error
		if err != nil {
			return nil, false, unavailable("read look-alikes", err)
		}
	} else {
		var err error
		if rows, err = l.lookAlikesOn(db, s, op, rule, maxLookAlikes+1); err != nil {
			return nil, false, err
		}
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

// lookAlikesOn returns up to limit operations of op's tenant and tool within rule's window,
// newest first, whose params at rule.On equal op's. Params are compared as sent downstream
// (sealed ones opened), so two cards with the same last four digits are not alike; an
// operation whose params were purged, or cannot be opened, is not compared.
func (l *Ledger) lookAlikesOn(db *gorm.DB, s Scope, op *Operation, rule LookAlikeRule, limit int) ([]Operation, error) {
	if op.Params == nil { // a queue's probe carries no params: read them
		var stored []Operation
		if err := db.Select("id", "params", "params_sealed").Where("id = ?", op.ID).Limit(1).Find(&stored).Error; err != nil {
			return nil, unavailable("read params of "+op.ID, err)
		}
		if len(stored) == 0 || stored[0].Params == nil {
			return nil, nil // purged: nothing to compare
		}
		op = &Operation{ID: op.ID, Tenant: op.Tenant, Tool: op.Tool, CreatedAt: op.CreatedAt,
			Params: stored[0].Params, ParamsSealed: stored[0].ParamsSealed}
	}
	mine, err := l.paramsAt(op, rule.On)
	if err != nil {
		return nil, nil // params that cannot be read have no look-alikes to show
	}
	var cands []Operation
	err = s.apply(db.Model(&Operation{}), "tenant").Select("id", "op_key", "state", "created_at", "params", "params_sealed").
		Where("tenant = ? AND tool = ? AND created_at >= ? AND created_at <= ? AND id <> ? AND params IS NOT NULL",
			op.Tenant, op.Tool, op.CreatedAt.Add(-rule.window()), op.CreatedAt.Add(rule.window()), op.ID).
		Order("created_at DESC").Limit(maxLookAlikeScan).Find(&cands).Error
	if err != nil {
		return nil, unavailable("read look-alikes", err)
	}
	var out []Operation
	for i := range cands {
		theirs, err := l.paramsAt(&cands[i], rule.On)
		if err != nil || !slices.Equal(mine, theirs) {
			continue
		}
		out = append(out, cands[i])
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// paramsAt returns the canonical JSON of op's params at each pointer ("" where absent).
func (l *Ledger) paramsAt(op *Operation, pointers []string) ([]string, error) {
	raw, err := l.Params(op)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	out := make([]string, len(pointers))
	for i, p := range pointers {
		if v, ok := atPointer(doc, p); ok {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			out[i] = string(b)
		}
	}
	return out, nil
}

// atPointer resolves a JSON pointer (RFC 6901) in a decoded document.
func atPointer(doc any, pointer string) (any, bool) {
	if pointer == "" {
		return doc, true
	}
	if !strings.HasPrefix(pointer, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// lookAlikesOf narrows db to op's look-alikes by fingerprint within s and window: a probe of
// operations_lookalike.
func lookAlikesOf(db *gorm.DB, s Scope, op *Operation, window time.Duration) *gorm.DB {
	return s.apply(db.Model(&Operation{}), "tenant").
		Where("tenant = ? AND fingerprint = ? AND created_at >= ? AND created_at <= ? AND id <> ?",
			op.Tenant, op.Fingerprint, op.CreatedAt.Add(-window), op.CreatedAt.Add(window), op.ID)
}

// HasLookAlikes reports, of ops (a page of a queue), which have at least one look-alike by
// fingerprint within s and LookAlikeWindow (see HasLookAlikesBy).
func (l *Ledger) HasLookAlikes(ctx context.Context, s Scope, ops []*Operation) (map[string]bool, error) {
	return l.HasLookAlikesBy(ctx, s, ops, func(string) LookAlikeRule { return LookAlikeRule{} })
}

// HasLookAlikesBy reports, of ops (a page of a queue), which have at least one look-alike within
// s, by the rule of each one's tool: one index probe each by fingerprint, a look-up as
// LookAlikesBy's by lookalike_on.
func (l *Ledger) HasLookAlikesBy(ctx context.Context, s Scope, ops []*Operation, rule func(tool string) LookAlikeRule) (map[string]bool, error) {
	out := map[string]bool{}
	db := l.scope(ctx)
	for _, op := range ops {
		r := rule(op.Tool)
		if len(r.On) > 0 {
			rows, err := l.lookAlikesOn(db, s, op, r, 1)
			if err != nil {
				return nil, err
			}
			if len(rows) > 0 {
				out[op.ID] = true
			}
			continue
		}
		var id string
		err := lookAlikesOf(db, s, op, r.window()).Select("id").Limit(1).Scan(&id).Error
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
