package downstream

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"

	"github.com/idemgate/idemgate/jobs/catalog"
)

// credentials are what one call presents to its connection: its auth and fixed headers,
// resolved when the call is made (a {file: …} secret is read each time, so a rotated one
// applies at once; a {tenant: …} secret is the call's tenant's).
type credentials struct {
	cn     *Connector
	conn   *catalog.Connection
	tenant string
	header http.Header
	token  *tokenEntry // oauth2 only
	// values are every credential value used, for the scrubber.
	values []string
}

func (cn *Connector) credentials(c Call) *credentials {
	return &credentials{cn: cn, conn: c.Connection, tenant: c.Tenant, header: http.Header{}}
}

// resolve reads every secret of the connection. A secret that cannot be read, or an OAuth2
// token that cannot be had, is an error: the request is not sent.
func (cr *credentials) resolve(ctx context.Context, client *http.Client) error {
	if cr.conn == nil {
		return nil
	}
	read := func(s catalog.Secret) (string, error) {
		v, err := s.Resolve(func(name string) (string, error) {
			if cr.cn.secrets == nil {
				return "", fmt.Errorf("tenant %q has no secret %q", cr.tenant, name)
			}
			return cr.cn.secrets.TenantSecret(ctx, cr.tenant, name)
		})
		if err != nil {
			return "", fmt.Errorf("connection %q: %w", cr.conn.Name, err)
		}
		if s.Literal == "" {
			cr.values = append(cr.values, v)
		}
		return v, nil
	}
	for _, h := range cr.conn.Headers {
		v, err := read(h.Value)
		if err != nil {
			return err
		}
		cr.header.Set(h.Name, v)
	}
	a := cr.conn.Auth
	if a == nil {
		return nil
	}
	switch a.Kind {
	case catalog.AuthBearer:
		v, err := read(a.Bearer)
		if err != nil {
			return err
		}
		cr.header.Set("Authorization", "Bearer "+v)
	case catalog.AuthBasic:
		u, err := read(a.Username)
		if err != nil {
			return err
		}
		p, err := read(a.Password)
		if err != nil {
			return err
		}
		// The encoded pair is what travels: a downstream that echoes the header echoes it.
		pair := base64.StdEncoding.EncodeToString([]byte(u + ":" + p))
		cr.values = append(cr.values, pair)
		cr.header.Set("Authorization", "Basic "+pair)
	case catalog.AuthHeader:
		v, err := read(a.Value)
		if err != nil {
			return err
		}
		cr.header.Set(a.Header, v)
	case catalog.AuthOAuth2:
		id, err := read(a.OAuth2.ClientID)
		if err != nil {
			return err
		}
		secret, err := read(a.OAuth2.ClientSecret)
		if err != nil {
			return err
		}
		// The client authenticates to the token endpoint with Basic base64(id:secret), each
		// half form-escaped as golang.org/x/oauth2 writes it (or with the secret in the form
		// body): an endpoint whose error quotes the request quotes a reversible secret.
		cr.values = append(cr.values,
			base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret))),
			base64.StdEncoding.EncodeToString([]byte(id+":"+secret)))
		cr.token = cr.cn.tokens.entry(cr.conn, cr.tenant, id, secret)
		return cr.bearer(ctx, client, false)
	}
	return nil
}

// bearer sets the OAuth2 token: the cached one unless fresh says to fetch a new one.
func (cr *credentials) bearer(ctx context.Context, client *http.Client, fresh bool) error {
	tok, err := cr.token.get(ctx, client, fresh)
	if err != nil {
		return fmt.Errorf("connection %q: the OAuth2 token endpoint: %w", cr.conn.Name, err)
	}
	cr.values = append(cr.values, tok)
	cr.header.Set("Authorization", "Bearer "+tok)
	return nil
}

// refreshable reports whether a 401 may be answered by fetching a new token.
func (cr *credentials) refreshable() bool { return cr.token != nil }

// refresh fetches a new token in place of the one the downstream refused.
func (cr *credentials) refresh(ctx context.Context, client *http.Client) error {
	return cr.bearer(ctx, client, true)
}

// apply sets the credentials' headers on a request's header.
func (cr *credentials) apply(h http.Header) {
	for name, vs := range cr.header {
		h[name] = vs
	}
}
