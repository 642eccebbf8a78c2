// Package web assembles the HTTP server: the Echo instance, middleware, the one error
// handler and the routes.
package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/idemgate/idemgate/catalog"
	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/problems"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// Config is what the server needs.
type Config struct {
	Ledger   *models.Ledger
	Catalog  *catalog.Catalog
	Executor *jobs.Executor
	Limiter  *handlers.RateLimiter
	// Sandbox, when set, is mounted under /sandbox/ (serve --demo).
	Sandbox http.Handler
	Log     *slog.Logger
}

// New returns the Echo instance serving the gateway.
func New(cfg Config) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(cfg.Log)
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{}))
	e.Use(recoverer(cfg.Log))
	e.Use(securityHeaders)
	routes(e, cfg)
	return e
}

// recoverer turns a panic into a 500 through the error handler, logged with its request id.
func recoverer(log *slog.Logger) echo.MiddlewareFunc {
	return middleware.RecoverWithConfig(middleware.RecoverConfig{
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			log.Error("panic", "err", err, "request_id", c.Response().Header().Get(echo.HeaderXRequestID), "stack", string(stack))
			return err
		},
	})
}

func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		if !strings.HasPrefix(c.Request().URL.Path, "/sandbox/") {
			h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		}
		return next(c)
	}
}

// authenticate resolves the bearer key of API requests; the caller then travels on the
// request context.
func authenticate(ledger *models.Ledger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			secret, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
			if !ok {
				return &handlers.Problem{Slug: problems.Unauthenticated, Detail: "send Authorization: Bearer <api key>"}
			}
			caller, err := ledger.Authenticate(c.Request().Context(), strings.TrimSpace(secret))
			if models.ErrorCode(err) == models.CodeNotFound {
				return &handlers.Problem{Slug: problems.Unauthenticated, Detail: "unknown or revoked API key", Err: err}
			}
			if err != nil {
				return err
			}
			c.SetRequest(c.Request().WithContext(handlers.WithCaller(c.Request().Context(), caller)))
			return next(c)
		}
	}
}

// errorHandler is the one place errors become answers: problem JSON for the API and service
// endpoints, a calm page for people.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		p := handlers.ProblemFrom(err)
		reqID := c.Response().Header().Get(echo.HeaderXRequestID)
		if p.Slug == problems.Internal || p.Slug == problems.LedgerUnavailable {
			log.Error("request failed", "err", err, "path", c.Request().URL.Path, "request_id", reqID)
		}
		var werr error
		if wantsPage(c.Request()) {
			t, _ := problems.Lookup(p.Slug)
			werr = render(c, t.Status, views.ErrorPage(t.Status, t.Title))
		} else {
			werr = handlers.WriteProblem(c, p)
		}
		if werr != nil {
			log.Error("writing error answer", "err", werr, "request_id", reqID)
		}
	}
}

// wantsPage reports whether a person, not a program, is asking: a browser request outside the
// API.
func wantsPage(r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		return false
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

func render(c echo.Context, status int, comp templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response())
}

// Serve serves e on ln until ctx ends, then shuts down gracefully: it stops accepting and
// lets requests in flight finish for up to grace, then closes what remains.
func Serve(ctx context.Context, e *echo.Echo, ln net.Listener, grace time.Duration) error {
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	e.Server = srv
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return srv.Close()
	}
	return nil
}
