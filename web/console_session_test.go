package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sessionCookie = "idemgate_session"

// consolePages are every console page, as a signed-out browser asks for them.
var consolePages = []string{"/", "/reviews", "/reviews/list", "/operations", "/operations/op_x", "/workflows/wf-1", "/admin",
	"/audit", "/exports"}

func TestConsoleRedirectsToLoginWithoutSession(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con := consoletest.Start(t, d, consoletest.Options{})
		b := con.NewBrowser(t)
		for _, path := range consolePages {
			p := b.Get(t, path)
			require.Equal(t, http.StatusSeeOther, p.Status, path)
			loc, err := url.Parse(p.Header.Get("Location"))
			require.NoError(t, err)
			assert.Equal(t, "/login", loc.Path, path)
			if path != "/" {
				assert.Equal(t, path, loc.Query().Get("next"), "the page comes back after sign-in")
			}
		}
		// A post with a valid token but no sign-in changes nothing and goes to the sign-in page.
		b.Get(t, "/login")
		p := b.Post(t, "/admin/tenants", url.Values{"name": {"sneaky"}})
		assert.Equal(t, http.StatusSeeOther, p.Status)
		assert.Equal(t, "/login", p.Header.Get("Location"))
		tenants, err := con.Ledger.ScopedTenants(t.Context(), models.AllTenants())
		require.NoError(t, err)
		assert.Empty(t, tenants)
	})
}

func TestLoginNextIsSameOriginOnly(t *testing.T) {
	t.Parallel()
	con := consoletest.Start(t, models.SQLite, consoletest.Options{})
	pw := con.User(t, "rita@example.com", models.RoleReviewer)
	for next, want := range map[string]string{
		"/operations?state=UNKNOWN": "/operations?state=UNKNOWN",
		"//evil.example/x":          "/",
		"/\\evil.example":           "/",
		"https://evil.example/":     "/",
		"javascript:alert(1)":       "/",
		"/logout":                   "/",
		"":                          "/",
	} {
		b := con.NewBrowser(t)
		b.Get(t, "/login?next="+url.QueryEscape(next))
		assert.Equal(t, want, formValue(b.Last, "next"), "form keeps only a safe next for %q", next)
		p := b.Post(t, "/login", url.Values{"email": {"rita@example.com"}, "password": {pw}, "next": {next}})
		require.Equal(t, http.StatusSeeOther, p.Status)
		assert.Equal(t, want, p.Header.Get("Location"), "next %q", next)
	}
}

func TestSessionCookieFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		opts       consoletest.Options
		header     map[string]string
		wantSecure bool
	}{
		{"plain HTTP", consoletest.Options{}, nil, false},
		{"TLS", consoletest.Options{TLS: true}, nil, true},
		{"forwarded https ignored without a trusted proxy", consoletest.Options{}, map[string]string{"X-Forwarded-Proto": "https"}, false},
		{"forwarded https ignored from a peer outside the proxies' ranges", consoletest.Options{TrustedProxies: proxies(t, "10.0.0.0/8,192.168.0.0/16")},
			map[string]string{"X-Forwarded-Proto": "https"}, false},
		{"forwarded https behind a trusted proxy", consoletest.Options{TrustedProxies: proxies(t, "127.0.0.0/8")},
			map[string]string{"X-Forwarded-Proto": "https"}, true},
		{"forwarded http behind a trusted proxy", consoletest.Options{TrustedProxies: proxies(t, "127.0.0.1")},
			map[string]string{"X-Forwarded-Proto": "http"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			con := consoletest.Start(t, models.SQLite, tc.opts)
			pw := con.User(t, "rita@example.com", models.RoleReviewer)
			b := con.NewBrowser(t)
			for k, v := range tc.header {
				b.Header.Set(k, v)
			}
			p := b.Login(t, "rita@example.com", pw)
			require.Equal(t, http.StatusSeeOther, p.Status)
			ck := setCookie(t, p, sessionCookie)
			assert.True(t, ck.HttpOnly, "HttpOnly")
			assert.Equal(t, http.SameSiteLaxMode, ck.SameSite)
			assert.Equal(t, "/", ck.Path)
			assert.Equal(t, tc.wantSecure, ck.Secure, "Secure")
			if tc.wantSecure {
				assert.Equal(t, "max-age=31536000", p.Header.Get("Strict-Transport-Security"), "HSTS over HTTPS")
			} else {
				assert.Empty(t, p.Header.Get("Strict-Transport-Security"), "no HSTS over plain HTTP")
			}
			assert.Equal(t, "same-origin", p.Header.Get("Referrer-Policy"))
			assert.LessOrEqual(t, ck.MaxAge, int((12 * time.Hour).Seconds()), "the cookie does not outlive the session")
		})
	}
}

func TestLoginRotatesTheSession(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con := consoletest.Start(t, d, consoletest.Options{})
		pw := con.User(t, "rita@example.com", models.RoleReviewer)

		// An attacker's browser gets a session and plants its cookie in the victim's.
		attacker := con.NewBrowser(t)
		attacker.Get(t, "/login")
		planted := attacker.Cookie(sessionCookie)
		require.NotNil(t, planted)
		before := attacker.Last.CSRF()

		victim := con.NewBrowser(t)
		setJarCookie(t, victim, con, planted)
		victim.Get(t, "/login")
		assert.Equal(t, before, victim.Last.CSRF(), "the planted session is in use")
		p := victim.Post(t, "/login", url.Values{"email": {"rita@example.com"}, "password": {pw}})
		require.Equal(t, http.StatusSeeOther, p.Status)
		after := victim.Cookie(sessionCookie)
		require.NotNil(t, after)
		assert.NotEqual(t, planted.Value, after.Value, "a new cookie at sign-in")
		require.Equal(t, http.StatusOK, victim.Get(t, "/").Status)
		assert.NotEqual(t, before, victim.Last.CSRF(), "a new CSRF token at sign-in")

		// The planted cookie gives the attacker nothing.
		assert.Equal(t, http.StatusSeeOther, attacker.Get(t, "/").Status)
	})
}

func TestLogoutEndsTheSessionForGood(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con := consoletest.Start(t, d, consoletest.Options{})
		pw := con.User(t, "rita@example.com", models.RoleReviewer)
		b := con.NewBrowser(t)
		b.MustLogin(t, "rita@example.com", pw)
		require.Equal(t, http.StatusOK, b.Get(t, "/").Status)
		copied := b.Cookie(sessionCookie)

		p := b.Post(t, "/logout", nil)
		require.Equal(t, http.StatusSeeOther, p.Status)
		assert.Equal(t, "/login?reason=signed-out", p.Header.Get("Location"))
		assert.Equal(t, -1, setCookie(t, p, sessionCookie).MaxAge, "the cookie is deleted")
		assert.Equal(t, http.StatusSeeOther, b.Get(t, "/").Status)

		// A copy of the cookie taken before sign-out is worthless after it.
		thief := con.NewBrowser(t)
		setJarCookie(t, thief, con, copied)
		assert.Equal(t, http.StatusSeeOther, thief.Get(t, "/").Status)
	})
}

func TestIdleTimeoutAndLifetime(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con := consoletest.Start(t, d, consoletest.Options{SessionIdle: 30 * time.Minute, SessionLifetime: 2 * time.Hour})
		pw := con.User(t, "rita@example.com", models.RoleReviewer)
		b := con.NewBrowser(t)
		b.MustLogin(t, "rita@example.com", pw)

		t.Run("activity keeps the session", func(t *testing.T) {
			for range 3 {
				con.Clock.Advance(25 * time.Minute)
				require.Equal(t, http.StatusOK, b.Get(t, "/").Status)
			}
		})
		t.Run("background refreshes are not activity", func(t *testing.T) {
			bg := b.Header.Clone()
			b.Header.Set("X-Idemgate-Background", "1")
			con.Clock.Advance(20 * time.Minute)
			require.Equal(t, http.StatusOK, b.Get(t, "/reviews/list").Status)
			b.Header = bg
			con.Clock.Advance(11 * time.Minute)
			p := b.Get(t, "/reviews")
			require.Equal(t, http.StatusSeeOther, p.Status, "31 minutes after the last real activity")
			assert.Contains(t, p.Header.Get("Location"), "reason=idle")
		})
		t.Run("signed out after idling", func(t *testing.T) {
			assert.Equal(t, http.StatusSeeOther, b.Get(t, "/").Status, "the session stays ended")
			b.MustLogin(t, "rita@example.com", pw)
			con.Clock.Advance(31 * time.Minute)
			p := b.Get(t, "/operations")
			require.Equal(t, http.StatusSeeOther, p.Status)
			assert.Equal(t, "/login?next=%2Foperations&reason=idle", p.Header.Get("Location"))
			b.Get(t, p.Header.Get("Location"))
			assert.Contains(t, b.Last.Body, "signed out after a while without activity")
		})
		t.Run("lifetime ends even an active session", func(t *testing.T) {
			b.MustLogin(t, "rita@example.com", pw)
			for range 4 {
				con.Clock.Advance(29 * time.Minute)
				require.Equal(t, http.StatusOK, b.Get(t, "/").Status)
			}
			con.Clock.Advance(5 * time.Minute)
			p := b.Get(t, "/")
			require.Equal(t, http.StatusSeeOther, p.Status)
			assert.Contains(t, p.Header.Get("Location"), "reason=expired")
		})
	})
}

func TestCSRFTokenRequiredOnEveryPost(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con := consoletest.Start(t, d, consoletest.Options{})
		pw := con.User(t, "ada@example.com", models.RoleAdmin)
		b := con.NewBrowser(t)

		// The sign-in form itself needs the token (login CSRF).
		b.Get(t, "/login")
		p := b.Post(t, "/login", url.Values{"email": {"ada@example.com"}, "password": {pw}, "csrf_token": {""}})
		assert.Equal(t, http.StatusForbidden, p.Status)
		assert.Contains(t, p.Body, "nothing was changed")
		assert.Equal(t, http.StatusSeeOther, b.Get(t, "/").Status, "still not signed in")

		b.MustLogin(t, "ada@example.com", pw)
		require.Equal(t, http.StatusOK, b.Get(t, "/admin").Status)
		for name, token := range map[string]string{"missing": "", "wrong": "not-the-token", "another session's": otherToken(t, con)} {
			t.Run(name, func(t *testing.T) {
				p := b.Post(t, "/admin/tenants", url.Values{"name": {"acme"}, "csrf_token": {token}})
				assert.Equal(t, http.StatusForbidden, p.Status)
				assert.Contains(t, p.Header.Get("Content-Type"), "text/html")
				assert.Contains(t, p.Body, `data-testid="error-page"`)
				tenants, err := con.Ledger.ScopedTenants(t.Context(), models.AllTenants())
				require.NoError(t, err)
				assert.Empty(t, tenants, "nothing changed")
				p = b.Post(t, "/logout", url.Values{"csrf_token": {token}})
				assert.Equal(t, http.StatusForbidden, p.Status, "sign-out too")
			})
		}
		p = b.Post(t, "/admin/tenants", url.Values{"name": {"acme"}})
		require.Equal(t, http.StatusSeeOther, p.Status, "with the page's token")
		tenants, err := con.Ledger.ScopedTenants(t.Context(), models.AllTenants())
		require.NoError(t, err)
		assert.Len(t, tenants, 1)
	})
}

func TestLoginRateLimit(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con := consoletest.Start(t, d, consoletest.Options{Limits: models.LoginLimits{Window: 15 * time.Minute, PerEmailIP: 3, PerIP: 5, PerEmail: 10}})
		pw := con.User(t, "rita@example.com", models.RoleReviewer)
		b := con.NewBrowser(t)

		for i := range 3 {
			p := b.Login(t, "rita@example.com", "wrong password "+string(rune('a'+i)))
			require.Equal(t, http.StatusUnauthorized, p.Status)
			assert.Contains(t, p.Body, "Wrong email or password.")
		}
		p := b.Login(t, "Rita@Example.com", pw)
		require.Equal(t, http.StatusTooManyRequests, p.Status, "even the right password is not checked")
		assert.Equal(t, "900", p.Header.Get("Retry-After"))
		assert.Contains(t, p.Body, "Too many failed sign-ins")
		assert.Contains(t, p.Body, `data-testid="login-form"`, "a calm page with the form")

		con.Clock.Advance(10 * time.Minute)
		assert.Equal(t, http.StatusTooManyRequests, b.Login(t, "rita@example.com", pw).Status, "refused attempts do not count")
		con.Clock.Advance(6 * time.Minute)
		require.Equal(t, http.StatusSeeOther, b.Login(t, "rita@example.com", pw).Status, "the window has passed")

		// Spraying many accounts from one address meets the per-address limit.
		sprayer := con.NewBrowser(t)
		for i := range 5 {
			p := sprayer.Login(t, "user"+string(rune('a'+i))+"@example.com", "guess guess guess")
			require.Equal(t, http.StatusUnauthorized, p.Status)
		}
		assert.Equal(t, http.StatusTooManyRequests, sprayer.Login(t, "someone@example.com", "guess guess guess").Status)
	})
}

// otherToken returns the CSRF token of another browser's session.
func otherToken(t *testing.T, con *consoletest.Console) string {
	other := con.NewBrowser(t)
	other.Get(t, "/login")
	return other.Last.CSRF()
}

func setCookie(t *testing.T, p *consoletest.Page, name string) *http.Cookie {
	t.Helper()
	resp := http.Response{Header: p.Header}
	for _, ck := range resp.Cookies() {
		if ck.Name == name {
			return ck
		}
	}
	t.Fatalf("no Set-Cookie %s in %v", name, p.Header)
	return nil
}

func setJarCookie(t *testing.T, b *consoletest.Browser, con *consoletest.Console, ck *http.Cookie) {
	t.Helper()
	u, err := url.Parse(con.URL)
	require.NoError(t, err)
	b.Client.Jar.SetCookies(u, []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: "/"}})
}

// formValue returns the value of the form field named name on page p.
func formValue(p *consoletest.Page, name string) string {
	i := strings.Index(p.Body, `name="`+name+`" value="`)
	if i < 0 {
		return ""
	}
	rest := p.Body[i+len(`name="`+name+`" value="`):]
	return rest[:strings.Index(rest, `"`)]
}
