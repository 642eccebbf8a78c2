package web

import (
	"net/http"
	"slices"

	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/handlers/sso"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/static"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// consoleBodyLimit bounds console form posts: forms carry a few short fields.
const consoleBodyLimit = "64K"

// routes lists every route of the gateway, in one place.
func routes(e *echo.Echo, cfg Config, refusals *handlers.RefusalBudget) {
	api := &handlers.API{Ledger: cfg.Ledger, Catalog: cfg.Catalog, Executor: cfg.Executor,
		Limiter: handlers.NewRateLimiter(cfg.RateLimit, cfg.RateBurst)}
	if cfg.Metrics != nil {
		api.Meter = cfg.Metrics
	}
	svc := &handlers.Service{Ledger: cfg.Ledger}

	e.GET("/healthz", svc.Healthz)
	e.GET("/readyz", svc.Readyz)
	e.GET("/problems", handlers.ProblemIndex)
	e.GET("/problems/:slug", handlers.ProblemPage)
	e.GET("/static/*", echo.WrapHandler(static.Handler()))
	e.GET("/openapi.json", echo.WrapHandler(static.OpenAPIHandler()))
	// The audit signing keys' public halves: public, without the console's session or CSRF, so
	// that an auditor without an account can fetch them (handlers.Service.AuditKeys).
	e.GET("/audit/keys", svc.AuditKeys)

	v1 := e.Group("/v1", authenticate(cfg.Ledger))
	v1.POST("/operations", api.CreateOperation)
	v1.GET("/operations", api.ListOperations)
	v1.GET("/operation-keys/:key", api.GetOperationByKey)
	v1.GET("/operations/:id", api.GetOperation)
	v1.GET("/operations/:id/events", api.Events)
	v1.POST("/operations/:id/cancel", api.Cancel)
	v1.POST("/operations/:id/compensate", api.Compensate)
	v1.GET("/tools", api.Tools)
	v1.GET("/budgets", api.Budgets)
	// The Model Context Protocol (Streamable HTTP), with the same API keys and ledger path.
	// A browser page of another site is refused before anything else (DNS rebinding).
	e.Any("/mcp", echo.WrapHandler(handlers.NewMCP(api, cfg.Log)), sameOrigin(cfg.TrustedProxies, cfg.AllowedOrigins), authenticate(cfg.Ledger))

	// The review console (docs/CONSOLE.md). Every page loads the session and checks CSRF tokens on
	// posts; all but the sign-in page need a signed-in user; review actions need a reviewer
	// or an admin, the audit log and exports an auditor or an admin, /admin an admin.
	sm := newSessionManager(cfg, refusals)
	con := &handlers.Console{Ledger: cfg.Ledger, Catalog: cfg.Catalog, Sessions: sm, Limits: cfg.LoginLimits, Now: cfg.Now, Refusals: refusals,
		RefreshEvery: cfg.ReviewRefresh, Executor: cfg.Executor, Log: cfg.Log, SSO: cfg.SSO, ApprovalWarning: cfg.ApprovalWarning,
		Mail: cfg.Mail}
	anyone := []echo.MiddlewareFunc{middleware.BodyLimit(consoleBodyLimit), handlers.Preferences, sm.load, refuseNULForm, sm.csrf}
	signedIn := slices.Concat(anyone, []echo.MiddlewareFunc{sm.requireUser})
	admin := slices.Concat(signedIn, []echo.MiddlewareFunc{sm.requireRole(onlyAdmins, models.RoleAdmin)})
	reviewer := slices.Concat(signedIn, []echo.MiddlewareFunc{sm.requireRole(onlyReviewers, models.RoleReviewer, models.RoleAdmin)})
	auditor := slices.Concat(signedIn, []echo.MiddlewareFunc{sm.requireRole(onlyAuditors, models.RoleAuditor, models.RoleAdmin)})

	e.GET("/login", con.LoginForm, anyone...)
	e.POST("/login", con.Login, anyone...)
	e.GET("/invite/:token", con.InviteForm, anyone...)
	e.POST("/invite/:token", con.AcceptInvite, anyone...)
	e.POST("/logout", con.Logout, anyone...)
	e.POST("/preferences", con.SavePreferences, anyone...)
	// Single sign-on's two legs are GETs (the provider redirects the browser back); the
	// state parameter, bound to the session cookie and spent once, is their CSRF defence.
	e.GET(sso.StartPath, con.SSOStart, anyone...)
	e.GET(sso.CallbackPath, con.SSOCallback, anyone...)
	e.GET("/", con.Dashboard, signedIn...)
	e.GET("/reviews", con.Reviews, signedIn...)
	e.POST("/reviews/email", con.SetEmail, reviewer...)
	e.GET("/reviews/list", con.ReviewList, signedIn...)
	e.GET("/operations", con.Operations, signedIn...)
	e.GET("/operations/:id", con.Operation, signedIn...)
	e.GET("/operations/:id/version", con.OperationVersion, signedIn...)
	e.GET("/workflows/:run", con.Workflow, signedIn...)
	e.GET("/views/:id", con.OpenView, signedIn...)
	e.POST("/views", con.SaveView, signedIn...)
	e.POST("/views/:id/delete", con.DeleteView, signedIn...)
	e.POST("/operations/:id/actions/confirm_succeeded", con.ConfirmSucceeded, reviewer...)
	e.POST("/operations/:id/actions/confirm_not_executed", con.ConfirmNotExecuted, reviewer...)
	e.POST("/operations/:id/actions/mark_failed", con.MarkFailed, reviewer...)
	e.POST("/operations/:id/actions/reconcile_now", con.ReconcileNow, reviewer...)
	e.POST("/operations/:id/actions/approve", con.Approve, reviewer...)
	e.POST("/operations/:id/actions/reject", con.Reject, reviewer...)
	e.POST("/operations/:id/actions/propose_compensation", con.ProposeCompensation, reviewer...)
	e.POST("/operations/:id/claim", con.ClaimReview, reviewer...)
	e.POST("/operations/:id/release", con.ReleaseReview, reviewer...)
	e.POST("/bulk/review", con.BulkReview, reviewer...)
	e.GET("/bulk/:id", con.Bulk, reviewer...)
	e.GET("/bulk/:id/version", con.BulkVersion, reviewer...)
	e.POST("/bulk/:id/apply", con.BulkApply, reviewer...)
	e.GET("/audit", con.AuditLog, auditor...)
	e.POST("/audit/verify", con.VerifyAudit, auditor...)
	e.GET("/exports", con.Exports, auditor...)
	e.POST("/exports/download", con.DownloadExport, auditor...)
	e.GET("/admin", con.Admin, admin...)
	e.POST("/admin/tenants", con.CreateTenant, admin...)
	e.POST("/admin/keys", con.CreateAPIKey, admin...)
	e.POST("/admin/keys/:id/revoke", con.RevokeAPIKey, admin...)
	e.POST("/admin/users", con.CreateUser, admin...)
	e.POST("/admin/users/:id/:change", con.ChangeUser, admin...)
	e.GET("/admin/budgets", con.Budgets, admin...)
	e.POST("/admin/budgets", con.SetBudget, admin...)
	e.GET("/admin/webhooks", con.Webhooks, admin...)
	e.POST("/admin/webhooks", con.CreateWebhook, admin...)
	e.POST("/admin/webhooks/:id/delete", con.DeleteWebhook, admin...)
	e.POST("/admin/webhooks/:id/test", con.TestWebhook, admin...)
	e.POST("/admin/webhooks/deliveries/:id/redeliver", con.Redeliver, admin...)

	if cfg.Sandbox != nil {
		sb := echo.WrapHandler(http.StripPrefix("/sandbox", cfg.Sandbox))
		e.Any("/sandbox", sb)
		e.Any("/sandbox/*", sb)
	}
}
