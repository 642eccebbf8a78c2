package downstream

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/idemgate/idemgate/jobs/catalog"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// tokenCache keeps OAuth2 tokens in memory until they expire (docs/TOOLS.md), one per connection,
// tenant and client: never in the ledger, never logged.
type tokenCache struct {
	mu      sync.Mutex
	entries map[tokenKey]*tokenEntry
}

type tokenKey struct {
	conn         *catalog.Connection
	tenant       string
	clientID     string
	clientSecret string
}

// tokenEntry is one client's token. Its lock is held while a token is fetched, so many calls
// that find none wait for one fetch.
type tokenEntry struct {
	mu    sync.Mutex
	cfg   clientcredentials.Config
	token *oauth2.Token
}

func (tc *tokenCache) entry(conn *catalog.Connection, tenant, id, secret string) *tokenEntry {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.entries == nil {
		tc.entries = map[tokenKey]*tokenEntry{}
	}
	k := tokenKey{conn, tenant, id, secret}
	if e, ok := tc.entries[k]; ok {
		return e
	}
	spec := conn.Auth.OAuth2
	cfg := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: spec.TokenURL, Scopes: spec.Scopes}
	switch spec.AuthStyle {
	case "basic":
		cfg.AuthStyle = oauth2.AuthStyleInHeader
	case "post":
		cfg.AuthStyle = oauth2.AuthStyleInParams
	}
	e := &tokenEntry{cfg: cfg}
	tc.entries[k] = e
	return e
}

// get returns the cached token while it is valid, else (or when fresh) a new one.
func (e *tokenEntry) get(ctx context.Context, client *http.Client, fresh bool) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !fresh && e.token.Valid() {
		return e.token.AccessToken, nil
	}
	tok, err := e.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, client))
	if err != nil {
		e.token = nil
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil {
			// The library's message quotes the endpoint's body; ours says what it answered.
			return "", errors.New(re.Response.Status + ": " + re.ErrorCode + " " + re.ErrorDescription)
		}
		return "", err
	}
	e.token = tok
	return tok.AccessToken, nil
}
