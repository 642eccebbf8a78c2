package sso_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/sso"
	"github.com/idemgate/idemgate/internal/oidctest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const callback = "https://console.example" + sso.CallbackPath

func setup(t *testing.T) (*oidctest.Provider, *sso.Provider) {
	idp := oidctest.Start(t, "idemgate-console", "s3cret", nil)
	idp.SignInAs(oidctest.Identity{Subject: "sub-ann", Claims: map[string]any{
		"email": "ann@example.com", "email_verified": true, "idemgate_role": "reviewer", "idemgate_tenants": []string{"acme"}}})
	p, err := sso.New(sso.Config{Issuer: idp.URL, ClientID: "idemgate-console", ClientSecret: "s3cret",
		RedirectURL: callback, Name: "Test IdP"})
	require.NoError(t, err)
	return idp, p
}

// authorize plays the browser between the two legs: it follows the provider's redirect and
// returns the callback's query.
func authorize(t *testing.T, to string) url.Values {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(to)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusFound, res.StatusCode)
	back, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, sso.CallbackPath, back.Path)
	return back.Query()
}

func refusal(t *testing.T, err error) string {
	t.Helper()
	var e *sso.Error
	require.True(t, errors.As(err, &e), "a refusal with a message for the person, got %v", err)
	return e.Message
}

func TestSignIn(t *testing.T) {
	ctx := context.Background()
	idp, p := setup(t)
	pend, to, err := p.Begin(ctx, "/reviews")
	require.NoError(t, err)
	u, err := url.Parse(to)
	require.NoError(t, err)
	assert.Equal(t, "S256", u.Query().Get("code_challenge_method"), "PKCE")
	assert.NotEmpty(t, u.Query().Get("nonce"))
	assert.NotContains(t, to, pend.Verifier, "the verifier never leaves the browser's cookie")

	login, err := p.Finish(ctx, pend, authorize(t, to))
	require.NoError(t, err)
	assert.Equal(t, models.FederatedLogin{Issuer: idp.URL, Subject: "sub-ann", Email: "ann@example.com",
		Role: models.RoleReviewer, Tenants: []string{"acme"}, State: pend.State}, login)
	assert.Equal(t, 1, idp.Exchanges())
}

func TestSignInRefusals(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		idp    func(*oidctest.Provider)
		tamper func(*sso.Pending, url.Values)
		want   string
	}{
		"wrong audience":   {idp: func(i *oidctest.Provider) { i.IssueForAudience("another-app") }, want: "could not be verified"},
		"expired token":    {idp: func(i *oidctest.Provider) { i.IssueWithLifetime(-time.Minute) }, want: "could not be verified"},
		"another's nonce":  {idp: func(i *oidctest.Provider) { i.IssueWithNonce("someone-elses") }, want: "belongs to another sign-in"},
		"state of another": {tamper: func(_ *sso.Pending, q url.Values) { q.Set("state", "forged") }, want: "not started in this browser"},
		"no pending":       {tamper: func(p *sso.Pending, _ url.Values) { *p = sso.Pending{} }, want: "not started in this browser"},
		"PKCE verifier":    {tamper: func(p *sso.Pending, _ url.Values) { p.Verifier = "not-the-one-whose-challenge-was-sent-xxxxxxxxx" }, want: "did not accept"},
		"too late":         {tamper: func(p *sso.Pending, _ url.Values) { p.Expires = time.Now().Add(-time.Second).Unix() }, want: "took too long"},
		"provider refused": {tamper: func(_ *sso.Pending, q url.Values) { q.Set("error", "access_denied"); q.Del("code") }, want: "refused the sign-in"},
	} {
		t.Run(name, func(t *testing.T) {
			idp, p := setup(t)
			if tc.idp != nil {
				tc.idp(idp)
			}
			pend, to, err := p.Begin(ctx, "/")
			require.NoError(t, err)
			q := authorize(t, to)
			if tc.tamper != nil {
				tc.tamper(&pend, q)
			}
			_, err = p.Finish(ctx, pend, q)
			assert.Contains(t, refusal(t, err), tc.want)
		})
	}
}

func TestClaimsMapping(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		claims  map[string]any
		tenants []string
		refused string
	}{
		"every tenant, said":      {claims: map[string]any{"idemgate_role": "admin", "idemgate_tenants": "*"}, tenants: nil},
		"every tenant, as a list": {claims: map[string]any{"idemgate_role": "admin", "idemgate_tenants": []string{"*"}}, tenants: nil},
		"one tenant as a string":  {claims: map[string]any{"idemgate_role": "auditor", "idemgate_tenants": "acme"}, tenants: []string{"acme"}},
		"no tenants claim":        {claims: map[string]any{"idemgate_role": "admin"}, refused: "names no tenant"},
		"empty tenants":           {claims: map[string]any{"idemgate_role": "admin", "idemgate_tenants": []string{}}, refused: "names no tenant"},
		"no role":                 {claims: map[string]any{"idemgate_tenants": "*"}, refused: "has no idemgate role"},
		"unknown role":            {claims: map[string]any{"idemgate_role": "root", "idemgate_tenants": "*"}, refused: "has no idemgate role"},
		"unverified email":        {claims: map[string]any{"idemgate_role": "admin", "idemgate_tenants": "*", "email_verified": false}, refused: "not verified"},
		"unverified as a string":  {claims: map[string]any{"idemgate_role": "admin", "idemgate_tenants": "*", "email_verified": "false"}, refused: "not verified"},
		"verified as a string":    {claims: map[string]any{"idemgate_role": "admin", "idemgate_tenants": "*", "email_verified": "true"}, refused: "not verified"},
	} {
		t.Run(name, func(t *testing.T) {
			idp, p := setup(t)
			claims := map[string]any{"email": "ann@example.com"}
			for k, v := range tc.claims {
				claims[k] = v
			}
			idp.SignInAs(oidctest.Identity{Subject: "sub-ann", Claims: claims})
			pend, to, err := p.Begin(ctx, "/")
			require.NoError(t, err)
			login, err := p.Finish(ctx, pend, authorize(t, to))
			if tc.refused != "" {
				assert.Contains(t, refusal(t, err), tc.refused)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.tenants, login.Tenants)
		})
	}
}

func TestUnreachableProvider(t *testing.T) {
	p, err := sso.New(sso.Config{Issuer: "http://127.0.0.1:1", ClientID: "c", RedirectURL: callback})
	require.NoError(t, err, "a provider that is down does not stop the gateway from starting")
	_, _, err = p.Begin(context.Background(), "/")
	assert.Contains(t, refusal(t, err), "cannot be reached")
}

func TestConfigChecked(t *testing.T) {
	for name, cfg := range map[string]sso.Config{
		"no issuer":          {ClientID: "c", RedirectURL: callback},
		"issuer not a URL":   {Issuer: "id.example.com", ClientID: "c", RedirectURL: callback},
		"no client":          {Issuer: "https://id.example.com", RedirectURL: callback},
		"redirect elsewhere": {Issuer: "https://id.example.com", ClientID: "c", RedirectURL: "https://console.example/"},
	} {
		_, err := sso.New(cfg)
		assert.Error(t, err, name)
	}
}
