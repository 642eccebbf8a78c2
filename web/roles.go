package web

import (
	"net/http"
	"slices"

	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
)

// Messages of the console's role checks.
const (
	onlyAdmins    = "Only admins can use the admin pages."
	onlyReviewers = "Only reviewers and admins can act on operations; your role can read them."
	onlyAuditors  = "Only auditors and admins can read the audit log and make exports."
)

// requireRole lets through only users of one of roles. Anyone else is refused with 403 and an
// audit entry: the user is known, and that the page exists is no secret; only records of other
// tenants are hidden as 404.
func (m *sessionManager) requireRole(message string, roles ...models.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			v := handlers.ViewerFrom(c.Request().Context())
			if v == nil {
				return echo.NewHTTPError(http.StatusForbidden, message)
			}
			if !slices.Contains(roles, v.Role) {
				return handlers.Forbid(c, m.refusals, v, message)
			}
			return next(c)
		}
	}
}

// recordCSRFRefusal writes the audit entry of a form post refused for its CSRF token. The
// session says who sent it when it is signed in; otherwise the address does.
func (m *sessionManager) recordCSRFRefusal(c echo.Context, rs *requestSession, missing bool) {
	actor := models.AnonymousActor(c.RealIP())
	if rs != nil && rs.token() != "" {
		if u, _, err := m.ledger.SessionUser(c.Request().Context(), rs.token()); err == nil {
			actor = "user:" + u.Email
		}
	}
	refusal := "wrong CSRF token"
	if missing {
		refusal = "no CSRF token"
	}
	m.refusals.Record(c, models.AuditInput{Actor: actor, Action: models.AuditCSRFRefused,
		Detail: map[string]any{"method": c.Request().Method, "path": c.Request().URL.Path, "ip": c.RealIP(), "refusal": refusal}})
}
