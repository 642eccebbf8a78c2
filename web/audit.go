package web

import (
	"context"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
)

// API refusals worth investigating (docs/AUDIT.md), by problem type.
var auditedRefusals = map[string]string{
	problems.Unauthenticated:        "api.unauthenticated",
	problems.ToolForbidden:          "api.tool_forbidden",
	problems.IdempotencyKeyMismatch: "api.key_mismatch",
}

// refusalAuditor writes the audit entries of refused API requests. Anonymous refusals go
// through the refusal budget, per address and in all: a flood of bad keys must not grow the
// log, and the serialised chain, without bound, and one client must not use up the budget of
// the others; what the budget drops is summed up in one entry.
type refusalAuditor struct {
	ledger    *models.Ledger
	log       *slog.Logger
	anonymous *handlers.RefusalBudget
}

func newRefusalAuditor(l *models.Ledger, log *slog.Logger, anonymous *handlers.RefusalBudget) *refusalAuditor {
	return &refusalAuditor{ledger: l, log: log, anonymous: anonymous}
}

// record audits p if it is a refusal worth investigating.
func (a *refusalAuditor) record(c echo.Context, p *handlers.Problem, reqID string) {
	action, ok := auditedRefusals[p.Slug]
	if !ok || a.ledger == nil {
		return
	}
	in := models.AuditInput{Action: action, Outcome: models.OutcomeRefused, RequestID: reqID,
		Detail: map[string]any{"method": c.Request().Method, "path": c.Path(), "problem": p.Slug}}
	if caller := handlers.CallerFrom(c.Request().Context()); caller != nil {
		in.Actor, in.Tenant = caller.Actor(), caller.Tenant
	} else {
		in.Actor = models.AnonymousActor(c.RealIP())
		a.anonymous.Record(c, in)
		return
	}
	// The operation concerned, even when the answer hid it from the caller (a key taken by a
	// tool the caller may not use): the audit log is for the people investigating.
	op := p.Op
	if op == nil {
		op = models.ErrorOperation(p.Err)
	}
	if op != nil {
		in.OperationID, in.Tenant = op.ID, op.Tenant
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 5*time.Second)
	defer cancel()
	if _, err := a.ledger.Audit(ctx, in); err != nil {
		a.log.Error("audit of a refused request failed", "err", err, "problem", p.Slug, "request_id", reqID)
	}
}
