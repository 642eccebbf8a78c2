package handlers

import (
	"net/url"
	"slices"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
)

// The conversions from ledger records to the pages' view models.

// OperationHref is the console page of operation id.
func OperationHref(id string) string { return "/operations/" + url.PathEscape(id) }

// WorkflowHref is the console page of a workflow run.
func WorkflowHref(runID string) string { return "/workflows/" + url.PathEscape(runID) }

func operationRow(op *models.Operation, now time.Time) views.OperationRow {
	r := views.OperationRow{
		ID: op.ID, Href: OperationHref(op.ID), Tenant: op.Tenant, Key: op.Key, Tool: op.Tool,
		State: string(op.State), StepID: deref(op.StepID),
		Created: views.NewTime(op.CreatedAt, now), Updated: views.NewTime(op.UpdatedAt, now),
		Attempts: op.Attempts, ErrorClass: deref(op.ErrorClass),
	}
	if op.WorkflowRunID != nil {
		r.WorkflowRunID, r.WorkflowHref = *op.WorkflowRunID, WorkflowHref(*op.WorkflowRunID)
	}
	return r
}

func operationRows(ops []*models.Operation, now time.Time) []views.OperationRow {
	out := make([]views.OperationRow, len(ops))
	for i, op := range ops {
		out[i] = operationRow(op, now)
	}
	return out
}

func timePtr(t *time.Time, now time.Time) *views.Time {
	if t == nil {
		return nil
	}
	v := views.NewTime(*t, now)
	return &v
}

// options turns values into select options, marking selected.
func options(values []string, selected string) []views.Option {
	out := make([]views.Option, len(values))
	for i, v := range values {
		out[i] = views.Option{Value: v, Label: v, Selected: v == selected}
	}
	return out
}

// tenantNames lists the names of tenants.
func tenantNames(ts []models.Tenant) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// stateNames lists the states in the console's order.
func stateNames() []string {
	out := make([]string, len(models.States))
	for i, s := range models.States {
		out[i] = string(s)
	}
	return out
}

// oneOf returns v when it is one of allowed, else "": a filter value nobody can choose is
// ignored rather than answered with an error page.
func oneOf(v string, allowed []string) string {
	if slices.Contains(allowed, v) {
		return v
	}
	return ""
}
