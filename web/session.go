package web

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/sessions"
	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/handlers/sso"
	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
)

// The console's session lives in one cookie, signed and encrypted with keys derived from the
// session secret (IDEMGATE_SESSION_KEY). It holds the ledger session's token (after sign-in),
// the CSRF token, the time of the last activity and, briefly, a flash message. The ledger
// keeps only the token's hash, so that signing out ends the session even for a copied cookie.

// sessionCookie names the cookie.
const sessionCookie = "idemgate_session"

// The session's values.
const (
	valToken = "token" // the ledger session's token; absent before sign-in
	valCSRF  = "csrf"  // the CSRF token every form carries
	valSeen  = "seen"  // unix seconds of the last activity, for the idle timeout
	valFlash = "flash" // JSON of a handlers.Flash
	valSSO   = "sso"   // JSON of an sso.Pending, between the two legs of a single sign-on
)

// Session defaults.
const (
	DefaultSessionIdle     = 30 * time.Minute
	DefaultSessionLifetime = 12 * time.Hour
)

// echo context keys.
const (
	ctxConsole = "idemgate.console" // set on console routes: errors become pages
	ctxSession = "idemgate.session"
)

// sessionManager loads, checks and saves console sessions. It implements handlers.Sessions.
type sessionManager struct {
	store          *sessions.CookieStore
	ledger         *models.Ledger
	now            func() time.Time
	idle, lifetime time.Duration
	proxies        TrustedProxies
	refusals       *handlers.RefusalBudget
	log            *slog.Logger
}

var _ handlers.Sessions = (*sessionManager)(nil)

// requestSession is the session of one request; dirty sessions are saved once, just before
// the response's headers are written.
type requestSession struct {
	s      *sessions.Session
	dirty  bool
	delete bool
}

func newSessionManager(cfg Config, refusals *handlers.RefusalBudget) *sessionManager {
	hashKey, blockKey := cookieKeys(cfg.SessionKey)
	m := &sessionManager{store: sessions.NewCookieStore(hashKey, blockKey), ledger: cfg.Ledger, now: cfg.Now,
		idle: cfg.SessionIdle, lifetime: cfg.SessionLifetime, proxies: cfg.TrustedProxies, refusals: refusals, log: cfg.Log}
	m.store.MaxAge(int(m.lifetime.Seconds()))
	return m
}

// cookieKeys derives the cookie's signing key (HMAC-SHA256, 64 bytes) and encryption key
// (AES-256) from the secret, each for its own purpose.
func cookieKeys(secret string) (hashKey, blockKey []byte) {
	derive := func(info string, n int) []byte {
		k, err := hkdf.Key(sha256.New, []byte(secret), nil, info, n)
		if err != nil {
			panic("web: derive session key: " + err.Error()) // only for impossible lengths
		}
		return k
	}
	return derive("idemgate session cookie signing", 64), derive("idemgate session cookie encryption", 32)
}

// load attaches the browser's session to the request, starting one (with a CSRF token) when
// there is none or its cookie cannot be read (a rotated key, tampering).
func (m *sessionManager) load(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(ctxConsole, true)
		s, err := m.store.New(c.Request(), sessionCookie)
		if err != nil {
			s = sessions.NewSession(m.store, sessionCookie)
		}
		rs := &requestSession{s: s}
		if csrf, _ := s.Values[valCSRF].(string); csrf == "" {
			s.Values[valCSRF], rs.dirty = randomToken(), true
		}
		c.Set(ctxSession, rs)
		c.Response().Before(func() { m.save(c, rs) })
		c.SetRequest(c.Request().WithContext(handlers.WithCSRFToken(c.Request().Context(), rs.csrf())))
		return next(c)
	}
}

func (m *sessionManager) save(c echo.Context, rs *requestSession) {
	if !rs.dirty {
		return
	}
	rs.s.Options = &sessions.Options{Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: m.secure(c.Request()), MaxAge: int(m.lifetime.Seconds())}
	if rs.delete {
		rs.s.Options.MaxAge = -1
	}
	if err := m.store.Save(c.Request(), c.Response().Writer, rs.s); err != nil {
		m.log.Error("saving console session", "err", err)
	}
}

// secure reports whether the cookie may only travel over HTTPS: when this request came over
// TLS, or through a trusted proxy that says it did (X-Forwarded-Proto: https). From anyone
// else the header is ignored, since any client could send it.
func (m *sessionManager) secure(r *http.Request) bool { return m.proxies.overHTTPS(r) }

func (rs *requestSession) csrf() string {
	t, _ := rs.s.Values[valCSRF].(string)
	return t
}

func (rs *requestSession) token() string {
	t, _ := rs.s.Values[valToken].(string)
	return t
}

// reset empties the session and gives it a new CSRF token.
func (rs *requestSession) reset() {
	rs.s.Values = map[any]any{valCSRF: randomToken()}
	rs.dirty = true
}

func session(c echo.Context) *requestSession {
	rs, _ := c.Get(ctxSession).(*requestSession)
	return rs
}

// csrf refuses a state-changing request whose csrf_token field (or X-CSRF-Token header) is
// not the session's token, comparing in constant time. Nothing runs: the answer is 403.
func (m *sessionManager) csrf(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		rs := session(c)
		got := c.FormValue("csrf_token")
		if got == "" {
			got = c.Request().Header.Get("X-CSRF-Token")
		}
		want := ""
		if rs != nil {
			want = rs.csrf()
		}
		if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			m.recordCSRFRefusal(c, rs, got == "")
			return echo.NewHTTPError(http.StatusForbidden,
				"This form has expired or did not come from this console, so nothing was changed. Go back, reload the page and try again.")
		}
		return next(c)
	}
}

// requireUser lets a request through only with a live session: known to the ledger, not
// signed out, within its lifetime and idle timeout. Otherwise it sends the browser to the
// sign-in page, which brings it back afterwards. The signed-in user travels on the context.
func (m *sessionManager) requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		rs := session(c)
		token := rs.token()
		if token == "" {
			return m.toLogin(c, "")
		}
		ctx := c.Request().Context()
		u, us, err := m.ledger.SessionUser(ctx, token)
		if models.ErrorCode(err) == models.CodeNotFound {
			rs.reset()
			return m.toLogin(c, "")
		}
		if err != nil {
			return err
		}
		now := m.now()
		seen, _ := rs.s.Values[valSeen].(int64)
		reason := ""
		switch {
		case now.Sub(us.CreatedAt) > m.lifetime:
			reason = handlers.LoginReasonExpired
		case now.Sub(time.Unix(seen, 0)) > m.idle:
			reason = handlers.LoginReasonIdle
		}
		if reason != "" {
			if err := m.ledger.EndSession(ctx, token); err != nil {
				return err
			}
			rs.reset()
			return m.toLogin(c, reason)
		}
		if c.Request().Header.Get(handlers.BackgroundHeader) == "" {
			rs.s.Values[valSeen], rs.dirty = now.Unix(), true
		}
		v := &handlers.Viewer{ID: u.ID, Email: u.Email, Role: u.Role, Scope: u.Scope(), CSRFToken: rs.csrf()}
		c.SetRequest(c.Request().WithContext(handlers.WithViewer(ctx, v)))
		return next(c)
	}
}

// toLogin redirects to the sign-in page. A page asked for directly comes back after sign-in
// (next); a form post cannot be replayed, and a background request is not a page, so they
// land on the dashboard.
func (m *sessionManager) toLogin(c echo.Context, reason string) error {
	q := url.Values{}
	r := c.Request()
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get(handlers.BackgroundHeader) == "" {
		if next := handlers.SafeNext(r.URL.RequestURI()); next != "/" {
			q.Set("next", next)
		}
	}
	if reason != "" {
		q.Set("reason", reason)
	}
	target := "/login"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	return c.Redirect(http.StatusSeeOther, target)
}

// SignIn starts a new session of u: a new ledger session, a new CSRF token, and nothing kept
// from the session the browser had before (which is ended), so a session planted before
// sign-in is worthless after it.
func (m *sessionManager) SignIn(c echo.Context, u *models.User) error {
	rs := session(c)
	ctx := c.Request().Context()
	if old := rs.token(); old != "" {
		if err := m.ledger.EndSession(ctx, old); err != nil {
			return err
		}
	}
	token, _, err := m.ledger.StartSession(ctx, u.ID)
	if err != nil {
		return err
	}
	rs.reset()
	rs.s.Values[valToken], rs.s.Values[valSeen] = token, m.now().Unix()
	return nil
}

// SignOut ends the session in the ledger and deletes the cookie.
func (m *sessionManager) SignOut(c echo.Context) error {
	rs := session(c)
	if token := rs.token(); token != "" {
		if err := m.ledger.EndSession(c.Request().Context(), token); err != nil {
			return err
		}
	}
	rs.reset()
	rs.delete = true
	return nil
}

// SetFlash keeps f in the session for the next page.
func (m *sessionManager) SetFlash(c echo.Context, f handlers.Flash) { session(c).keep(valFlash, f) }

// TakeFlash returns the kept flash and removes it from the session.
func (m *sessionManager) TakeFlash(c echo.Context) (handlers.Flash, bool) {
	var f handlers.Flash
	return f, session(c).take(valFlash, &f)
}

// SetPendingSSO keeps a single sign-on's state, nonce and PKCE verifier in the encrypted
// cookie until the provider sends the browser back.
func (m *sessionManager) SetPendingSSO(c echo.Context, p sso.Pending) { session(c).keep(valSSO, p) }

// TakePendingSSO returns the pending single sign-on and removes it from the session: a
// callback is good once.
func (m *sessionManager) TakePendingSSO(c echo.Context) (sso.Pending, bool) {
	var p sso.Pending
	return p, session(c).take(valSSO, &p)
}

// keep stores v, a struct of strings, as JSON under key until take reads it.
func (rs *requestSession) keep(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return // the values kept are structs of strings and numbers: they always marshal
	}
	rs.s.Values[key], rs.dirty = string(b), true
}

// take reads the value kept under key into v and removes it; false when none was kept (or
// it no longer reads, after an upgrade changed its type).
func (rs *requestSession) take(key string, v any) bool {
	raw, _ := rs.s.Values[key].(string)
	if raw == "" {
		return false
	}
	delete(rs.s.Values, key)
	rs.dirty = true
	return json.Unmarshal([]byte(raw), v) == nil
}

// randomToken returns 32 random bytes, url-safe base64.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
