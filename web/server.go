// Package web assembles the HTTP server: the Echo instance, middleware, the one error
// handler and the routes.
package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/handlers/headers"
	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/handlers/sso"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/idemgate/idemgate/web/telemetry"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config is what the server is built from: the gateway's parts, which internal/app builds
// once for every entry point, and the Settings an operator chooses.
type Config struct {
	Ledger   *models.Ledger
	Catalog  *catalog.Catalog
	Executor *jobs.Executor
	// Metrics, when set, counts every request. It is not served here: /metrics has a
	// listener of its own (telemetry.Metrics.Handler).
	Metrics *telemetry.Metrics
	// TracerProvider makes a server span per request (nil: none, though an incoming
	// traceparent still reaches the attempts the request starts).
	TracerProvider trace.TracerProvider
	Log            *slog.Logger
	// Now is the console's clock (sessions, ages); nil means the wall clock.
	Now func() time.Time
	Settings
}

// Settings are the server's knobs: flags and environment for serve, fixed values in tests.
type Settings struct {
	// RateLimit allows each API principal that many requests per second (0: unlimited), in
	// bursts of RateBurst (default twice the rate, plus one).
	RateLimit float64
	RateBurst int
	// Sandbox, when set, is mounted under /sandbox/ (serve --demo).
	Sandbox http.Handler

	// SessionKey signs and encrypts the console's session cookie (IDEMGATE_SESSION_KEY).
	// Empty: a random key for this process only, so sessions end at restart.
	SessionKey string
	// SessionIdle and SessionLifetime end a console session after that long without
	// activity, and that long after sign-in (defaults DefaultSessionIdle and
	// DefaultSessionLifetime).
	SessionIdle     time.Duration
	SessionLifetime time.Duration
	// LoginLimits bound failed sign-ins (default models.DefaultLoginLimits).
	LoginLimits models.LoginLimits
	// RefusalLimits bound the refusals anyone can cause that reach the audit log (default
	// handlers.DefaultRefusalLimits).
	RefusalLimits handlers.RefusalLimits
	// TrustedProxies are the reverse proxies in front of the server (--trust-proxy). From
	// them only, X-Forwarded-Proto says whether the client came over HTTPS (the session
	// cookie's Secure flag, Strict-Transport-Security) and X-Forwarded-For who the client is
	// (failed sign-ins and refusals are counted by address). From anyone else both headers are
	// ignored, because any client could send them.
	TrustedProxies TrustedProxies
	// AllowedOrigins are the sites, besides the gateway's own origin, whose browser pages may
	// call /mcp (--allowed-origin); any other Origin is refused with 403.
	AllowedOrigins AllowedOrigins
	// ReviewRefresh is how often the review queue reloads its list (default 15 s).
	ReviewRefresh time.Duration
	// ApprovalWarning is how long before an approval lapses the review queue marks it (the
	// same --approval-warning that sends review.expiring; zero: the default).
	ApprovalWarning time.Duration
	// SSO, when set, offers sign-in through an OpenID Connect provider beside passwords.
	SSO *sso.Provider
	// Mail says reviewers are emailed (--smtp-url): the review queue offers each person to
	// mute them.
	Mail bool
}

// withDefaults fills the zero fields of cfg.
func (cfg Config) withDefaults() Config {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionKey == "" {
		cfg.SessionKey = randomToken()
		cfg.Log.Warn("no session key configured: console sessions last only as long as this process")
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.SessionLifetime <= 0 {
		cfg.SessionLifetime = DefaultSessionLifetime
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = noop.NewTracerProvider()
	}
	if cfg.RateBurst <= 0 {
		cfg.RateBurst = int(cfg.RateLimit*2) + 1
	}
	if cfg.LoginLimits == (models.LoginLimits{}) {
		cfg.LoginLimits = models.DefaultLoginLimits
	}
	return cfg
}

// New returns the Echo instance serving the gateway.
func New(cfg Config) *echo.Echo {
	cfg = cfg.withDefaults()
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = cfg.TrustedProxies.ipExtractor()
	refusals := handlers.NewRefusalBudget(cfg.Ledger, cfg.Log, cfg.RefusalLimits)
	e.HTTPErrorHandler = errorHandler(cfg.Log, newRefusalAuditor(cfg.Ledger, cfg.Log, refusals))
	e.Use(ledgerDeadline)
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{}))
	e.Use(traceRequests(cfg.TracerProvider.Tracer("github.com/idemgate/idemgate/web")))
	e.Use(recoverer(cfg.Log))
	e.Use(securityHeaders(cfg.TrustedProxies))
	e.Use(refuseNUL)
	if cfg.Metrics != nil {
		e.Use(measure(cfg.Metrics))
	}
	routes(e, cfg, refusals)
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

// hstsMaxAge is how long a browser that reached the gateway over HTTPS keeps to HTTPS: a year.
// No includeSubDomains: the gateway does not speak for its domain's other hosts.
const hstsMaxAge = "max-age=31536000"

// securityHeaders sets the headers every answer carries. Strict-Transport-Security only on
// answers to HTTPS requests (over TLS, or a trusted proxy's X-Forwarded-Proto: https), as RFC
// 6797 asks: over plain HTTP it would mean nothing, and a client must not be able to ask for it.
func securityHeaders(proxies TrustedProxies) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Response().Header()
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("X-Frame-Options", "DENY")
			h.Set("Referrer-Policy", "same-origin")
			if proxies.overHTTPS(c.Request()) {
				h.Set("Strict-Transport-Security", hstsMaxAge)
			}
			if !strings.HasPrefix(c.Request().URL.Path, "/sandbox/") {
				h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
			}
			return next(c)
		}
	}
}

// authenticate resolves the bearer key of API requests; the caller then travels on the
// request context.
func authenticate(ledger *models.Ledger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			secret, ok := bearer(c.Request().Header.Get("Authorization"))
			if !ok {
				// RFC 6750 §3: a request without credentials is told the scheme, no error code.
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="idemgate"`)
				return &handlers.Problem{Slug: problems.Unauthenticated, Detail: "send Authorization: Bearer <api key>"}
			}
			caller, err := ledger.Authenticate(c.Request().Context(), secret)
			if models.ErrorCode(err) == models.CodeNotFound {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="idemgate", error="invalid_token", error_description="unknown or revoked API key"`)
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

// bearer reads the token of an Authorization header of the Bearer scheme, whose name is
// case-insensitive (RFC 9110 §11.1); ok is false for any other header, or none.
func bearer(header string) (token string, ok bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(header), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// errorHandler is the one place errors become answers: problem JSON for the API and service
// endpoints, a calm page for people.
func errorHandler(log *slog.Logger, refusals *refusalAuditor) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		reqID := c.Response().Header().Get(echo.HeaderXRequestID)
		var werr error
		if console, _ := c.Get(ctxConsole).(bool); console {
			// Console routes always answer with a page, whatever the client accepts.
			a := handlers.AnswerFor(err)
			if a.Status >= 500 {
				log.Error("console request failed", "err", err, "path", c.Request().URL.Path, "request_id", reqID)
			}
			c.Response().Header().Set("Cache-Control", "no-store")
			if a.Problem.RetryAfter > 0 {
				c.Response().Header().Set("Retry-After", strconv.Itoa(a.Problem.RetryAfter))
			}
			page := views.ErrorPage(a.Status, a.Message)
			if layout, ok := handlers.ErrorLayout(c.Request().Context(), views.ErrorHeading(a.Status)); ok {
				page = views.ErrorPageIn(layout, a.Status, a.Message)
			}
			werr = render(c, a.Status, page)
		} else if p := handlers.ProblemFrom(err); wantsPage(c.Request()) {
			logProblem(log, p, err, c, reqID)
			t, _ := problems.Lookup(p.Slug)
			werr = render(c, t.Status, views.ErrorPage(t.Status, t.Title))
		} else {
			logProblem(log, p, err, c, reqID)
			refusals.record(c, p, reqID)
			werr = handlers.WriteProblem(c, p)
		}
		if werr != nil {
			log.Error("writing error answer", "err", werr, "request_id", reqID)
		}
	}
}

func logProblem(log *slog.Logger, p *handlers.Problem, err error, c echo.Context, reqID string) {
	if p.Slug == problems.Internal || p.Slug == problems.LedgerUnavailable {
		log.Error("request failed", "err", err, "path", c.Request().URL.Path, "request_id", reqID)
	}
}

// answer writes the answer to err now, through the one error handler, so that what wraps the
// handler sees the status that was sent (echo's own recover middleware does the same).
func answer(c echo.Context, err error) {
	if err != nil {
		c.Error(err)
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

// Timeouts bound how long the server waits on a client, so that slow or idle connections
// cannot pile up: for the request's headers, for the whole request, for the answer (counted
// from the end of the headers), and between requests on a kept-alive connection.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// DefaultTimeouts are serve's. The write timeout leaves room for the longest wait an agent may
// ask for (Prefer: wait=60, or an MCP call's idemgate/wait) and the answer after it; an export
// download, which may stream for longer, extends its own deadline as it makes progress
// (handlers.KeepWriting).
var DefaultTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second,
	Write: headers.MaxWait + 30*time.Second, Idle: 120 * time.Second}

// NewServer returns the HTTP server of h with timeouts t.
func NewServer(h http.Handler, t Timeouts) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read,
		WriteTimeout: t.Write, IdleTimeout: t.Idle}
}

// Serve serves srv on ln until ctx ends, then shuts down gracefully: it stops accepting and
// lets requests in flight finish for up to grace, then closes what remains.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration) error {
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

// measure counts every request by method, route pattern (never the raw path, whose ids
// would make the label unbounded) and status.
func measure(m *telemetry.Metrics) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			answer(c, next(c))
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			m.HTTP(c.Request().Method, route, c.Response().Status, time.Since(start))
			return nil
		}
	}
}
