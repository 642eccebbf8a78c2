package handlers

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
)

// Refused console requests worth investigating are written to the audit log (docs/AUDIT.md): who
// tried what, and why it was refused. Recording never changes the answer: a refusal stands even
// when the ledger cannot record it, and that failure is logged instead.

// RequestID is the request's id (X-Request-Id), as the audit log records it.
func RequestID(c echo.Context) string { return c.Response().Header().Get(echo.HeaderXRequestID) }

// RecordRefusal appends an audit entry with outcome refused about the request c. The request's
// own context may already be over (a client that went away); the entry is written regardless.
func RecordRefusal(c echo.Context, l *models.Ledger, log *slog.Logger, in models.AuditInput) {
	in.Outcome = models.OutcomeRefused
	if in.RequestID == "" {
		in.RequestID = RequestID(c)
	}
	if _, err := l.Audit(context.WithoutCancel(c.Request().Context()), in); err != nil {
		logger(log).Error("recording a refused request in the audit log", "err", err, "action", in.Action, "request_id", in.RequestID)
	}
}

// Forbid records, within budget b, that v's role does not allow the request and returns the
// 403 answer, with a message written for v.
func Forbid(c echo.Context, b *RefusalBudget, v *Viewer, message string) error {
	b.Record(c, models.AuditInput{Actor: v.Actor(), Action: models.AuditForbidden,
		Detail: map[string]any{"method": c.Request().Method, "path": c.Request().URL.Path, "role": string(v.Role), "refusal": message}})
	return echo.NewHTTPError(http.StatusForbidden, message)
}

// forbid is Forbid with the console's ledger and log.
func (h *Console) forbid(c echo.Context, v *Viewer, message string) error {
	return Forbid(c, h.Refusals, v, message)
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
