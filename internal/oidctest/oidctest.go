// Package oidctest serves a small OpenID Connect provider for tests: discovery and keys (from
// go-oidc's own test server), an authorization endpoint that approves at once for the identity
// the test sets, and a token endpoint that checks the client's secret, the redirect URI and the
// PKCE verifier, and spends each code once. Knobs let a test make the provider misbehave: a
// token for another audience, an expired one, a nonce of another sign-in.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	gooidctest "github.com/coreos/go-oidc/v3/oidc/oidctest"
)

const keyID = "test-key"

// Identity is who the provider says signs in next.
type Identity struct {
	Subject string
	// Claims are added to the ID token: email, email_verified, idemgate_role, ...
	Claims map[string]any
}

// Provider is a running test provider.
type Provider struct {
	URL          string
	ClientID     string
	ClientSecret string

	key   *rsa.PrivateKey
	disco *gooidctest.Server
	srv   *httptest.Server

	mu       sync.Mutex
	identity Identity
	codes    map[string]grant
	now      func() time.Time
	// misbehaviour for the next tokens
	audience string
	lifetime time.Duration
	nonce    string
	reuse    bool
	exchange int
}

// grant is what a code stands for until it is exchanged.
type grant struct {
	identity    Identity
	redirectURI string
	challenge   string
	nonce       string
}

// Start serves a provider for the test's lifetime, with a client registered as clientID and
// secret, and now as its clock (nil: time.Now).
func Start(t testing.TB, clientID, secret string, now func() time.Time) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("oidctest: key: %v", err)
	}
	if now == nil {
		now = time.Now
	}
	p := &Provider{ClientID: clientID, ClientSecret: secret, key: key, codes: map[string]grant{}, now: now,
		lifetime: 5 * time.Minute,
		disco:    &gooidctest.Server{PublicKeys: []gooidctest.PublicKey{{PublicKey: key.Public(), KeyID: keyID, Algorithm: oidc.RS256}}}}
	mux := http.NewServeMux()
	mux.Handle("GET /.well-known/openid-configuration", p.disco)
	mux.Handle("GET /keys", p.disco)
	mux.HandleFunc("GET /auth", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	p.URL = p.srv.URL
	p.disco.SetIssuer(p.URL)
	return p
}

// SignInAs sets who the provider approves from now on.
func (p *Provider) SignInAs(id Identity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.identity = Identity{Subject: id.Subject, Claims: maps.Clone(id.Claims)}
}

// IssueForAudience makes the next ID tokens name another audience ("" restores the client's).
func (p *Provider) IssueForAudience(aud string) { p.set(func() { p.audience = aud }) }

// IssueWithLifetime sets how long the next ID tokens are valid; negative issues expired ones.
func (p *Provider) IssueWithLifetime(d time.Duration) { p.set(func() { p.lifetime = d }) }

// IssueWithNonce makes the next ID tokens carry this nonce instead of the sign-in's.
func (p *Provider) IssueWithNonce(n string) { p.set(func() { p.nonce = n }) }

// AllowCodeReuse makes the provider lax: a code can be exchanged again, as a careless
// provider might, so that a test reaches the console's own defence against a replayed callback.
func (p *Provider) AllowCodeReuse() { p.set(func() { p.reuse = true }) }

// Exchanges counts the codes exchanged for tokens.
func (p *Provider) Exchanges() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exchange
}

func (p *Provider) set(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != p.ClientID || q.Get("response_type") != "code" {
		http.Error(w, "unknown client or response type", http.StatusBadRequest)
		return
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "PKCE with S256 is required", http.StatusBadRequest)
		return
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Host == "" {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	code := random()
	p.mu.Lock()
	if p.identity.Subject == "" {
		p.mu.Unlock()
		http.Error(w, "oidctest: no identity set (SignInAs)", http.StatusInternalServerError)
		return
	}
	p.codes[code] = grant{identity: p.identity, redirectURI: redirect.String(), challenge: q.Get("code_challenge"), nonce: q.Get("nonce")}
	p.mu.Unlock()
	back := redirect.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenError(w, "invalid_request")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || secret != p.ClientSecret {
		tokenError(w, "invalid_client")
		return
	}
	p.mu.Lock()
	g, found := p.codes[r.PostForm.Get("code")]
	if !p.reuse {
		delete(p.codes, r.PostForm.Get("code")) // a code is spent by its first exchange, good or bad
	}
	aud, lifetime, nonce := p.audience, p.lifetime, p.nonce
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case r.PostForm.Get("grant_type") != "authorization_code" || !found:
		tokenError(w, "invalid_grant")
		return
	case r.PostForm.Get("redirect_uri") != g.redirectURI:
		tokenError(w, "invalid_grant")
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		tokenError(w, "invalid_grant") // PKCE: the verifier does not match the challenge
		return
	}
	if aud == "" {
		aud = p.ClientID
	}
	if nonce == "" {
		nonce = g.nonce
	}
	now := p.now()
	claims := maps.Clone(g.identity.Claims)
	if claims == nil {
		claims = map[string]any{}
	}
	maps.Copy(claims, map[string]any{"iss": p.URL, "sub": g.identity.Subject, "aud": aud, "nonce": nonce,
		"iat": now.Unix(), "exp": now.Add(lifetime).Unix()})
	raw, err := json.Marshal(claims)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p.set(func() { p.exchange++ })
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": random(), "token_type": "Bearer", "expires_in": 300,
		"id_token": gooidctest.SignIDToken(p.key, keyID, oidc.RS256, string(raw))})
}

func tokenError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
