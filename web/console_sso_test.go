package web_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/handlers/sso"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/internal/oidctest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ssoConsole runs a console offering single sign-on with a provider the test serves, which
// signs in ann, a reviewer of acme.
func ssoConsole(t *testing.T, d models.Dialect) (*consoletest.Console, *oidctest.Provider) {
	t.Helper()
	var con *consoletest.Console
	// The provider keeps the console's time, so that its tokens are fresh to the console. It
	// reads the clock only when it issues a token, after con is set.
	idp := oidctest.Start(t, "idemgate-console", "client-secret", func() time.Time { return con.Clock.Now() })
	idp.SignInAs(oidctest.Identity{Subject: "sub-ann", Claims: map[string]any{
		"email": "ann@example.com", "email_verified": true, "idemgate_role": "reviewer", "idemgate_tenants": []string{"acme"}}})
	con = consoletest.Start(t, d, consoletest.Options{SSO: &sso.Config{Issuer: idp.URL, ClientID: "idemgate-console",
		ClientSecret: "client-secret", Name: "Test IdP"}})
	con.Tenant(t, "acme")
	con.Tenant(t, "globex")
	return con, idp
}

// ssoLeg follows one redirect of the sign-in, from the console to the provider or back,
// and returns where the answer sends the browser next.
func ssoLeg(t *testing.T, b *consoletest.Browser, to string) (*http.Response, string) {
	t.Helper()
	res, err := b.Client.Get(to)
	require.NoError(t, err)
	res.Body.Close()
	return res, res.Header.Get("Location")
}

func TestSingleSignOn(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con, idp := ssoConsole(t, d)
		acme := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "a-1", Tool: "refunds.issue",
			Params: `{"amount_cents":1,"currency":"EUR","order_id":"1"}`, Unknown: true, Review: true})
		globex := con.Operation(t, consoletest.Seed{Tenant: "globex", Key: "g-1", Tool: "refunds.issue",
			Params: `{"amount_cents":2,"currency":"EUR","order_id":"2"}`, Unknown: true, Review: true})

		// A lax provider that takes a code twice, so that the replays below reach the
		// console's own defences.
		idp.AllowCodeReuse()
		b := con.NewBrowser(t)
		login := b.Get(t, "/login?next=%2Freviews")
		require.Equal(t, http.StatusOK, login.Status)
		assert.Contains(t, login.Body, "Sign in with Test IdP")

		res, toIdP := ssoLeg(t, b, con.URL+sso.StartPath+"?next=%2Freviews")
		require.Equal(t, http.StatusFound, res.StatusCode)
		require.Contains(t, toIdP, idp.URL+"/auth?")
		_, callback := ssoLeg(t, b, toIdP)
		require.Contains(t, callback, con.URL+sso.CallbackPath+"?")
		before := b.Client.Jar.Cookies(mustURL(t, con.URL)) // the cookie with the pending sign-in
		res, next := ssoLeg(t, b, callback)
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		assert.Equal(t, "/reviews", next, "back where the person was going")

		page := b.Get(t, "/reviews")
		require.Equal(t, http.StatusOK, page.Status)
		assert.Contains(t, page.Body, "ann@example.com")
		assert.Equal(t, http.StatusOK, b.Get(t, "/operations/"+acme.ID).Status)
		assert.Equal(t, http.StatusNotFound, b.Get(t, "/operations/"+globex.ID).Status, "the tenants claim limits what ann sees")
		assert.Equal(t, 1, idp.Exchanges())

		u, err := con.Ledger.UserByEmail(t.Context(), "ann@example.com")
		require.NoError(t, err)
		assert.True(t, u.Federated())
		assert.Equal(t, models.RoleReviewer, u.Role)

		// The same callback again, in the same browser: its pending sign-in is gone.
		res, _ = ssoLeg(t, b, callback)
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "a callback works once")

		// With a copy of the cookie as it was before the callback: the ledger has spent the state.
		thief := con.NewBrowser(t)
		thief.Client.Jar.SetCookies(mustURL(t, con.URL), before)
		res, _ = ssoLeg(t, thief, callback)
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "a replayed state is refused")
		assert.Equal(t, http.StatusSeeOther, thief.Get(t, "/reviews").Status, "and signs nobody in")
		assert.Equal(t, 2, idp.Exchanges(), "the replay reached the provider and was stopped by the ledger")
	})
}

func TestSingleSignOnRefusals(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		misbehave func(*oidctest.Provider)
		message   string
	}{
		"wrong audience": {func(p *oidctest.Provider) { p.IssueForAudience("another-app") }, "could not be verified"},
		"expired token":  {func(p *oidctest.Provider) { p.IssueWithLifetime(-time.Minute) }, "could not be verified"},
		"no role": {func(p *oidctest.Provider) {
			p.SignInAs(oidctest.Identity{Subject: "sub-x", Claims: map[string]any{"email": "x@example.com", "idemgate_tenants": "*"}})
		}, "has no idemgate role"},
		"email of a local user": {func(p *oidctest.Provider) {
			p.SignInAs(oidctest.Identity{Subject: "sub-mallory", Claims: map[string]any{"email": "rita@example.com",
				"idemgate_role": "admin", "idemgate_tenants": "*"}})
		}, "already exists in the console"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			con, idp := ssoConsole(t, models.SQLite)
			con.User(t, "rita@example.com", models.RoleReviewer, "acme")
			tc.misbehave(idp)
			b := con.NewBrowser(t)
			_, toIdP := ssoLeg(t, b, con.URL+sso.StartPath)
			_, callback := ssoLeg(t, b, toIdP)
			page := b.Get(t, callback[len(con.URL):])
			require.Equal(t, http.StatusUnauthorized, page.Status)
			assert.Contains(t, page.Body, tc.message)
			assert.Equal(t, http.StatusSeeOther, b.Get(t, "/").Status, "nobody is signed in")

			entries, _, err := con.Ledger.AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Action: models.AuditLoginFailed, Limit: 5})
			require.NoError(t, err)
			require.Len(t, entries, 1, "the refused sign-in is audited")
			assert.Contains(t, entries[0].Detail, "single sign-on")
			rita, err := con.Ledger.UserByEmail(t.Context(), "rita@example.com")
			require.NoError(t, err)
			assert.False(t, rita.Federated(), "the local user is untouched")
			assert.Equal(t, models.RoleReviewer, rita.Role)
		})
	}
}

// A person signs in with the provider's button in a real browser and lands on the page they
// asked for, signed in.
func TestBrowserSingleSignOn(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con, _ := ssoConsole(t, models.Postgres)
	run(t, ctx,
		chromedp.Navigate(con.URL+"/reviews"),
		chromedp.WaitVisible(testID("login-sso")),
		chromedp.Click(testID("login-sso")),
		chromedp.WaitVisible(testID("logout")),
	)
	assert.Equal(t, con.URL+"/reviews", value(t, ctx, chromedp.Location()))
	assert.Contains(t, value(t, ctx, chromedp.OuterHTML("body")), "ann@example.com")
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}
