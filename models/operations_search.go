package models

import (
	"context"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Search narrows the console's operation search. Zero fields do not filter; the filters that
// are set must all hold.
type Search struct {
	ID     string // exactly this operation
	Key    string // operations whose key contains this, ignoring case
	Tool   string
	State  State
	Tenant string
	// Reference is the downstream's reference recorded for the operation's effect
	// (downstream_ref), exactly.
	Reference     string
	ErrorClass    string
	WorkflowRunID string
	// Param matches one param's stored value (see ParamMatch).
	Param ParamMatch
	From  time.Time // created at or after
	To    time.Time // created before
	// Before is the cursor: ids strictly older than this one.
	Before string
	Limit  int
}

// ParamMatch finds operations whose top-level param Name holds Value, as stored: a string
// equal to Value, or a number, boolean or null spelt as Value. With data keys the stored
// params are the masked ones, so a sensitive param could only ever match "***"; without them
// it is stored in clear, and a search by it would let anyone who may search confirm a guess.
// So the caller must refuse a sensitive Name (the catalogue knows which are) and name in Tools
// the tools whose params may be searched by it: the catalogue's tools that do not mask it. An
// operation of any other tool (one no longer in the catalogue, whose sensitive params nobody
// knows now) never matches. A ParamMatch without Tools is refused, so that a caller that
// forgot fails closed.
type ParamMatch struct {
	Name  string
	Value string
	Tools []string
}

// Set reports whether the match filters at all.
func (p ParamMatch) Set() bool { return p.Name != "" }

// ValidParamName reports whether name can be searched for: letters, digits, '_' and '-', so
// that it is spelt the same in the stored JSON and in a JSON path.
func ValidParamName(name string) bool {
	if name == "" || len(name) > 100 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// SearchOperations returns a page of operations within scope matching f, newest first, and
// whether more follow.
//
// Every filter is a condition on the newest-first walk of the operations (LIMIT f.Limit+1), so
// a common match stops early; docs/PERFORMANCE.md measures each kind on 1,000,000 operations.
func (l *Ledger) SearchOperations(ctx context.Context, s Scope, f Search) ([]*Operation, bool, error) {
	if err := f.check(); err != nil {
		return nil, false, err
	}
	q := s.apply(l.scope(ctx), "tenant")
	q = l.whereSearch(q, f)
	if f.Before != "" {
		q = q.Where("id < ?", f.Before)
	}
	var ops []*Operation
	if err := q.Order("id DESC").Limit(f.Limit + 1).Find(&ops).Error; err != nil {
		return nil, false, unavailable("search operations", err)
	}
	more := len(ops) > f.Limit
	if more {
		ops = ops[:f.Limit]
	}
	return ops, more, nil
}

// check refuses a search that cannot be run.
func (f Search) check() error {
	switch {
	case f.Limit <= 0 || f.Limit > 500:
		return errorf(CodeInvalid, "limit must be between 1 and 500")
	case f.State != "" && !f.State.Valid():
		return errorf(CodeInvalid, "unknown state %q", f.State)
	case f.Param.Set() && !ValidParamName(f.Param.Name):
		return errorf(CodeInvalid, "a param's name is letters, digits, '_' and '-'")
	case f.Param.Set() && f.Param.Tools == nil:
		return errorf(CodeInvalid, "a search by param %q was not checked against the tool's sensitive params", f.Param.Name)
	}
	return nil
}

// whereSearch narrows q to the operations f matches (all but the cursor).
func (l *Ledger) whereSearch(q *gorm.DB, f Search) *gorm.DB {
	if f.ID != "" {
		q = q.Where("id = ?", f.ID)
	}
	if f.Key != "" {
		// A substring, not LIKE: '%' and '_' in a key are characters like any other.
		// (SQLite's lower folds ASCII letters only.)
		q = q.Where(l.contains("lower(op_key)"), strings.ToLower(f.Key))
	}
	if f.Reference != "" {
		q = q.Where("downstream_ref = ?", f.Reference)
	}
	if f.ErrorClass != "" {
		q = q.Where("error_class = ?", f.ErrorClass)
	}
	if f.WorkflowRunID != "" {
		q = q.Where("workflow_run_id = ?", f.WorkflowRunID)
	}
	if f.Param.Set() {
		q = l.whereParam(q, f.Param)
	}
	return whereOperations(q, f.Tenant, f.Tool, f.State, f.From, f.To)
}

// contains is the condition "column contains ?" on the ledger's engine.
func (l *Ledger) contains(column string) string {
	if l.dialect == Postgres {
		return "strpos(" + column + ", ?) > 0"
	}
	return "instr(" + column + ", ?) > 0"
}

// whereParam narrows q to operations of p.Tools whose stored param p.Name holds p.Value. Only
// that param is read, by a JSON path: never the text of the whole document, whose other values
// may be sensitive ones stored in clear (without data keys). A test on the whole text (a
// substring before the JSON) would take longer when a guess is a part of any stored value, a
// timing oracle for secrets (docs/SECURITY.md); reading one member costs the same whatever the
// other members hold. Purged params are NULL and match nothing.
func (l *Ledger) whereParam(q *gorm.DB, p ParamMatch) *gorm.DB {
	if len(p.Tools) == 0 {
		return q.Where("1 = 0")
	}
	q = q.Where("tool IN ?", p.Tools)
	if l.dialect == Postgres {
		return q.Where("(params::jsonb ->> ?::text) = ?", p.Name, p.Value)
	}
	// json_extract gives a boolean as 1 or 0; PostgreSQL's ->> spells it, as JSON does.
	path := `$."` + p.Name + `"`
	return q.Where("(CASE json_type(params, ?) WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "+
		"ELSE CAST(json_extract(params, ?) AS TEXT) END) = ?", path, path, p.Value)
}

// workflowShown bounds the operations shown for one workflow run.
const workflowShown = 1000

// WorkflowOperations returns the operations of one workflow run within scope, in creation
// order. None is CodeNotFound, as is a run of a tenant outside scope.
func (l *Ledger) WorkflowOperations(ctx context.Context, s Scope, runID string) ([]*Operation, error) {
	var ops []*Operation
	err := s.apply(l.scope(ctx), "tenant").Where("workflow_run_id = ?", runID).
		Order("created_at, id").Limit(workflowShown).Find(&ops).Error
	if err != nil {
		return nil, unavailable("workflow operations", err)
	}
	if len(ops) == 0 {
		return nil, errorf(CodeNotFound, "no operations of workflow run %q", runID)
	}
	return ops, nil
}

// whereOperations narrows q to operations of tenant, tool and state created in [from, to); zero
// values do not filter. The console's search and the exports share it, so both read a filter
// the same way.
func whereOperations(q *gorm.DB, tenant, tool string, state State, from, to time.Time) *gorm.DB {
	if tenant != "" {
		q = q.Where("tenant = ?", tenant)
	}
	if tool != "" {
		q = q.Where("tool = ?", tool)
	}
	if state != "" {
		q = q.Where("state = ?", state)
	}
	if !from.IsZero() {
		q = q.Where("created_at >= ?", from.UTC())
	}
	if !to.IsZero() {
		q = q.Where("created_at < ?", to.UTC())
	}
	return q
}

// ErrorClasses lists the error classes an operation may record, for the search's choice.
func ErrorClasses() []string {
	return []string{ErrorAmbiguous, ErrorCancelled, ErrorNotSent, ErrorPermissionRevoked, ErrorRejected,
		ErrorRejectedByReviewer, ErrorRetriesExhausted, ErrorThrottled}
}
