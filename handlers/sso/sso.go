// Package sso signs console users in through an OpenID Connect provider: the authorization
// code flow with PKCE, a nonce bound to the browser's pending sign-in, the ID token verified
// (signature, issuer, audience, expiry), and the provider's claims mapped to a role and tenants.
// It holds no state of its own between the two legs: the pending sign-in travels in the
// browser's encrypted session cookie, and the ledger refuses a state used twice.
package sso

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/idemgate/idemgate/models"
	"golang.org/x/oauth2"
)

// Default claim names, when the configuration names none.
const (
	DefaultRoleClaim    = "idemgate_role"
	DefaultTenantsClaim = "idemgate_tenants"
)

// AllTenants is the tenants claim's value for a user of every tenant. It must be said: a
// missing claim never widens a user to every tenant.
const AllTenants = "*"

// pendingTTL bounds how long a person may take at the provider.
const pendingTTL = 10 * time.Minute

// Config names the provider and how its claims map to the console's roles and tenants. The
// zero Config is single sign-on switched off.
type Config struct {
	// Issuer is the provider's issuer URL; discovery reads Issuer/.well-known/openid-configuration.
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is this console's callback as registered at the provider:
	// https://<console>/login/sso/callback.
	RedirectURL string
	// Name is shown on the sign-in button ("Sign in with Name"); default "single sign-on".
	Name string
	// RoleClaim names the claim holding reviewer, auditor or admin.
	RoleClaim string
	// TenantsClaim names the claim holding the user's tenants: a list of names, or "*" (or
	// ["*"]) for every tenant.
	TenantsClaim string
	// HTTPClient talks to the provider; nil is a client with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock ID tokens' expiry is checked against; nil is time.Now.
	Now func() time.Time
}

// Enabled reports whether single sign-on is configured.
func (c Config) Enabled() bool { return c.Issuer != "" }

// Provider signs people in through one OpenID Connect provider. Discovery happens at the first
// sign-in, not at start-up, so a gateway starts while its provider is unreachable; a failed
// discovery is tried again at the next sign-in.
type Provider struct {
	cfg Config

	mu       sync.Mutex
	provider *oidc.Provider
}

// New checks cfg and returns its provider; it makes no request.
func New(cfg Config) (*Provider, error) {
	u, err := url.Parse(cfg.Issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("sso: issuer %q is not an http(s) URL", cfg.Issuer)
	}
	if cfg.ClientID == "" {
		return nil, errors.New("sso: a client id is needed")
	}
	if r, err := url.Parse(cfg.RedirectURL); err != nil || r.Host == "" || !strings.HasSuffix(r.Path, CallbackPath) {
		return nil, fmt.Errorf("sso: redirect URL %q must be this console's %s", cfg.RedirectURL, CallbackPath)
	}
	if cfg.Name == "" {
		cfg.Name = "single sign-on"
	}
	if cfg.RoleClaim == "" {
		cfg.RoleClaim = DefaultRoleClaim
	}
	if cfg.TenantsClaim == "" {
		cfg.TenantsClaim = DefaultTenantsClaim
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Provider{cfg: cfg}, nil
}

// The console's paths of the two legs.
const (
	StartPath    = "/login/sso"
	CallbackPath = "/login/sso/callback"
)

// Name is what the sign-in button calls the provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Pending is a sign-in between its two legs, kept in the browser's encrypted session cookie.
type Pending struct {
	State    string `json:"state"`
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"` // PKCE code verifier
	Next     string `json:"next"`     // where to go after signing in (already checked as same-site)
	Expires  int64  `json:"expires"`  // unix seconds
}

// Error is a refused sign-in, with what to tell the person; Err is for the log.
type Error struct {
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return "sso: " + e.Message + ": " + e.Err.Error()
	}
	return "sso: " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

func refuse(msg string, err error) error { return &Error{Message: msg, Err: err} }

// Begin starts a sign-in: the pending state to keep in the browser, and the provider's URL to
// send the browser to.
func (p *Provider) Begin(ctx context.Context, next string) (Pending, string, error) {
	op, err := p.discover(ctx)
	if err != nil {
		return Pending{}, "", err
	}
	pend := Pending{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(),
		Next: next, Expires: p.cfg.Now().Add(pendingTTL).Unix()}
	to := p.oauth(op).AuthCodeURL(pend.State, oidc.Nonce(pend.Nonce), oauth2.S256ChallengeOption(pend.Verifier))
	return pend, to, nil
}

// Finish completes a sign-in from the provider's callback query: the state must be the pending
// one's, the code is exchanged with the PKCE verifier, and the ID token must verify and carry
// the pending nonce. It returns the sign-in for the ledger, or an *Error.
func (p *Provider) Finish(ctx context.Context, pend Pending, q url.Values) (models.FederatedLogin, error) {
	var none models.FederatedLogin
	if pend.State == "" {
		return none, refuse("This sign-in was not started in this browser, or was already used. Start again.", nil)
	}
	if p.cfg.Now().Unix() > pend.Expires {
		return none, refuse("The sign-in took too long. Start again.", nil)
	}
	if !equalSecrets(q.Get("state"), pend.State) {
		return none, refuse("This sign-in was not started in this browser. Start again.", nil)
	}
	if e := q.Get("error"); e != "" {
		return none, refuse("The identity provider refused the sign-in ("+e+").", errors.New(q.Get("error_description")))
	}
	op, err := p.discover(ctx)
	if err != nil {
		return none, err
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, p.cfg.HTTPClient)
	tok, err := p.oauth(op).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pend.Verifier))
	if err != nil {
		return none, refuse("The identity provider did not accept the sign-in's code.", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return none, refuse("The identity provider sent no ID token.", nil)
	}
	idt, err := op.VerifierContext(oidc.ClientContext(ctx, p.cfg.HTTPClient),
		&oidc.Config{ClientID: p.cfg.ClientID, Now: p.cfg.Now}).Verify(ctx, raw)
	if err != nil {
		return none, refuse("The identity provider's answer could not be verified.", err)
	}
	if !equalSecrets(idt.Nonce, pend.Nonce) {
		return none, refuse("The identity provider's answer belongs to another sign-in.", nil)
	}
	return p.login(idt, pend.State)
}

// login maps the token's claims to the ledger's sign-in.
func (p *Provider) login(idt *oidc.IDToken, state string) (models.FederatedLogin, error) {
	var none models.FederatedLogin
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return none, refuse("The identity provider's answer could not be read.", err)
	}
	email, _ := claims["email"].(string)
	if email == "" {
		return none, refuse("The identity provider gave no email for this account.", nil)
	}
	// Only the boolean true verifies: "false" as a string is truthy to a careless reader, and
	// "true" as a string is not what the standard says. A provider that makes no such claim
	// at all (many enterprise ones, whose emails their admins set) is taken at its word.
	if v, said := claims["email_verified"]; said && v != true {
		return none, refuse("The identity provider has not verified this account's email.", nil)
	}
	role, _ := claims[p.cfg.RoleClaim].(string)
	if !models.Role(role).Valid() {
		return none, refuse(fmt.Sprintf("Your account at %s has no idemgate role (claim %q: reviewer, auditor or admin). Ask your administrator.", p.cfg.Name, p.cfg.RoleClaim), nil)
	}
	tenants, ok := tenantList(claims[p.cfg.TenantsClaim])
	if !ok {
		return none, refuse(fmt.Sprintf("Your account at %s names no tenant (claim %q). Ask your administrator.", p.cfg.Name, p.cfg.TenantsClaim), nil)
	}
	return models.FederatedLogin{Issuer: idt.Issuer, Subject: idt.Subject, Email: email,
		Role: models.Role(role), Tenants: tenants, State: state}, nil
}

// tenantList reads the tenants claim: "*" or ["*"] is every tenant (nil); a list of names, or
// one name, limits the user to them. Anything else, missing or empty included, is not ok.
func tenantList(v any) ([]string, bool) {
	var names []string
	switch v := v.(type) {
	case string:
		names = strings.Split(v, ",")
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			names = append(names, s)
		}
	default:
		return nil, false
	}
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == AllTenants {
			return nil, true
		}
		if n != "" {
			out = append(out, n)
		}
	}
	return out, len(out) > 0
}

// discover returns the provider's metadata, fetching it once it answers.
func (p *Provider) discover(ctx context.Context) (*oidc.Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.provider != nil {
		return p.provider, nil
	}
	op, err := oidc.NewProvider(oidc.ClientContext(ctx, p.cfg.HTTPClient), p.cfg.Issuer)
	if err != nil {
		return nil, refuse("The identity provider cannot be reached right now. Try again in a minute, or sign in with a password.", err)
	}
	p.provider = op
	return op, nil
}

func (p *Provider) oauth(op *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, RedirectURL: p.cfg.RedirectURL,
		Endpoint: op.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "email", "profile"}}
}

func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// equalSecrets compares two secrets in constant time; an empty one never matches.
func equalSecrets(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
