package models

import (
	"context"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// A bulk decision is one reviewer's one action with one reason over many operations. It adds
// no rule of its own to the review actions: each operation is still decided by its own call
// (ConfirmNotExecuted, MarkFailed, ...) in its own transaction with its own audit entry,
// checked against the state and attempt count recorded here when the reviewer confirmed. The
// ledger only keeps the run: what was selected, as it was then, and what became of each.

// Statuses of a bulk decision.
const (
	BulkPrepared = "prepared" // confirmed by nobody yet: the snapshot a reviewer is looking at
	BulkApplying = "applying" // taken by one apply; an apply that stopped half-way stays here
	BulkApplied  = "applied"
)

// Outcomes of one operation of a bulk decision; "" is not tried (yet).
const (
	BulkDone    = "done"
	BulkRefused = "refused"
)

// BulkLimit is the most operations one bulk decision takes.
const BulkLimit = 1000

// BulkDecision is a bulk decision and, when read with its items, its operations.
type BulkDecision struct {
	ID    string `gorm:"primaryKey"`
	Actor string
	// ActorID is its owner's user id (Person): only they apply it.
	ActorID string
	Action  string
	Status  string
	Reason  *string
	// LeftOut counts selected operations not in the state the action applies to; Unseen those
	// not found within the reviewer's scope; Capped says "all matching" found more than
	// BulkLimit and only the first were taken.
	LeftOut   int
	Unseen    int
	Capped    bool
	CreatedAt time.Time
	AppliedAt *time.Time
	Items     []BulkItem `gorm:"-"`
	// Hidden counts the operations of the decision outside the scope it was read with.
	Hidden int `gorm:"-"`
}

// TableName is the table of bulk decisions.
func (BulkDecision) TableName() string { return "bulk_decisions" }

// BulkItem is one operation of a bulk decision: as it was when the reviewer confirmed, and its
// outcome.
type BulkItem struct {
	BulkID           string `gorm:"primaryKey"`
	Seq              int    `gorm:"primaryKey;autoIncrement:false"`
	OperationID      string
	Tenant           string
	Key              string `gorm:"column:op_key"`
	Tool             string
	ExpectedState    State
	ExpectedAttempts int
	Outcome          string
	Message          string
}

// TableName is the table of bulk decisions' operations.
func (BulkItem) TableName() string { return "bulk_decision_items" }

// ActionAppliesTo is the state an operation must be in for a review action: the same state
// the single action checks (act's allowed state).
func ActionAppliesTo(action string) (State, bool) {
	switch action {
	case ActionConfirmNotExecuted, ActionMarkFailed, ActionReconcileNow, ActionConfirmSucceeded:
		return StateUnknown, true
	case ActionApprove, ActionReject:
		return StateAwaitingApproval, true
	}
	return "", false
}

// BulkSelection is what a reviewer asks a bulk decision over.
type BulkSelection struct {
	By     Person
	Action string
	IDs    []string // in the order the list showed them; duplicates are taken once
	Capped bool
}

// PrepareBulk records sel as a prepared bulk decision of actor over the operations of sel.IDs
// that are within s and in the state the action applies to, each with its state and attempt
// count now. The ids are the client's: those outside s are not read (counted as Unseen), so a
// hand-edited form cannot reach another tenant's operation.
func (l *Ledger) PrepareBulk(ctx context.Context, s Scope, sel BulkSelection) (*BulkDecision, error) {
	want, ok := ActionAppliesTo(sel.Action)
	if !ok || sel.Action == ActionConfirmSucceeded { // needs a reference per operation
		return nil, errorf(CodeInvalid, "%q cannot be applied in bulk", sel.Action)
	}
	ids := distinct(sel.IDs)
	if len(ids) == 0 {
		return nil, errorf(CodeInvalid, "no operations were selected")
	}
	if len(ids) > BulkLimit {
		return nil, errorf(CodeInvalid, "at most %d operations can be decided at once, not %d", BulkLimit, len(ids))
	}
	found, err := l.bulkOperations(ctx, s, ids)
	if err != nil {
		return nil, err
	}
	b := &BulkDecision{ID: newID("bulk"), Actor: sel.By.Actor, ActorID: sel.By.UserID, Action: sel.Action, Status: BulkPrepared,
		Capped: sel.Capped, CreatedAt: l.clock()}
	for _, id := range ids {
		op, ok := found[id]
		switch {
		case !ok:
			b.Unseen++
		case op.State != want:
			b.LeftOut++
		default:
			b.Items = append(b.Items, BulkItem{BulkID: b.ID, Seq: len(b.Items) + 1, OperationID: op.ID, Tenant: op.Tenant,
				Key: op.Key, Tool: op.Tool, ExpectedState: op.State, ExpectedAttempts: op.Attempts})
		}
	}
	err = l.txn(ctx, "prepare bulk decision", func(tx *gorm.DB) ([]string, error) {
		if err := tx.Create(b).Error; err != nil {
			return nil, err
		}
		if len(b.Items) == 0 {
			return nil, nil
		}
		return nil, tx.CreateInBatches(b.Items, 200).Error
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// distinct is ids without blanks and repeats, in their order.
func distinct(ids []string) []string {
	out := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// bulkOperations reads the operations of ids within s, by id.
func (l *Ledger) bulkOperations(ctx context.Context, s Scope, ids []string) (map[string]Operation, error) {
	out := make(map[string]Operation, len(ids))
	for chunk := range slices.Chunk(ids, 500) {
		var ops []Operation
		err := s.apply(l.scope(ctx).Model(&Operation{}), "tenant").Select("id, tenant, op_key, tool, state, attempts").
			Where("id IN ?", chunk).Find(&ops).Error
		if err != nil {
			return nil, unavailable("bulk selection", err)
		}
		for _, op := range ops {
			out[op.ID] = op
		}
	}
	return out, nil
}

// Owner is who prepared the bulk decision.
func (b *BulkDecision) Owner() Person { return Person{UserID: b.ActorID, Actor: b.Actor} }

// StartBulk takes by's prepared bulk decision id for applying it with reason, once: a second
// apply (a double click, the back button) finds it taken and is CodeStale, and one prepared
// longer than maxAge ago is CodeStale too (its snapshot is too old to decide on). Another
// person's is CodeNotFound. It returns the decision with the items within s.
func (l *Ledger) StartBulk(ctx context.Context, s Scope, by Person, id, reason string, maxAge time.Duration) (*BulkDecision, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, errorf(CodeInvalid, "a reason is required")
	}
	now := l.clock()
	err := l.txn(ctx, "start bulk decision", func(tx *gorm.DB) ([]string, error) {
		var b BulkDecision
		if err := tx.Where("id = ?", id).Take(&b).Error; err != nil {
			if notFound(err) {
				return nil, errorf(CodeNotFound, "bulk decision not found")
			}
			return nil, err
		}
		if !b.Owner().Is(by) {
			return nil, errorf(CodeNotFound, "bulk decision not found")
		}
		res := tx.Model(&BulkDecision{}).Where("id = ? AND status = ? AND created_at > ?", id, BulkPrepared, now.Add(-maxAge)).
			Updates(map[string]any{"status": BulkApplying, "reason": reason, "applied_at": now})
		if res.Error != nil || res.RowsAffected == 1 {
			return nil, res.Error
		}
		if b.Status != BulkPrepared {
			return nil, errorf(CodeStale, "this bulk decision has already been applied; nothing was done again")
		}
		return nil, errorf(CodeStale, "this bulk decision was prepared more than %d minutes ago; select the operations again", int(maxAge.Minutes()))
	})
	if err != nil {
		return nil, err
	}
	return l.BulkDecision(ctx, s, id)
}

// RecordBulkOutcome records what became of one operation of a bulk decision.
func (l *Ledger) RecordBulkOutcome(ctx context.Context, id string, seq int, outcome, message string) error {
	err := l.db.WithContext(ctx).Model(&BulkItem{}).Where("bulk_id = ? AND seq = ?", id, seq).
		Updates(map[string]any{"outcome": outcome, "message": message}).Error
	if err != nil {
		return unavailable("record bulk outcome", err)
	}
	return nil
}

// FinishBulk marks a bulk decision applied: every operation was tried.
func (l *Ledger) FinishBulk(ctx context.Context, id string) error {
	err := l.db.WithContext(ctx).Model(&BulkDecision{}).Where("id = ? AND status = ?", id, BulkApplying).
		Update("status", BulkApplied).Error
	if err != nil {
		return unavailable("finish bulk decision", err)
	}
	return nil
}

// BulkDecision reads a bulk decision with its operations within s, in the order selected, and
// counts in Hidden those outside s. Who may see it (its owner; an admin whose scope covers
// every operation of it) is the console's to check.
func (l *Ledger) BulkDecision(ctx context.Context, s Scope, id string) (*BulkDecision, error) {
	var b BulkDecision
	if err := l.scope(ctx).Where("id = ?", id).Take(&b).Error; err != nil {
		if notFound(err) {
			return nil, errorf(CodeNotFound, "bulk decision not found")
		}
		return nil, unavailable("read bulk decision", err)
	}
	if err := s.apply(l.scope(ctx).Where("bulk_id = ?", id), "tenant").Order("seq").Find(&b.Items).Error; err != nil {
		return nil, unavailable("read bulk decision items", err)
	}
	var all int64
	if err := l.scope(ctx).Model(&BulkItem{}).Where("bulk_id = ?", id).Count(&all).Error; err != nil {
		return nil, unavailable("count bulk decision items", err)
	}
	b.Hidden = int(all) - len(b.Items)
	return &b, nil
}
