package catalog

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Connection is one entry of the tools file's connections (docs/TOOLS.md): where a downstream
// lives and how the gateway proves who it is there. Its credentials are secret references,
// never values: a Connection can be printed without showing one.
type Connection struct {
	Name    string
	BaseURL string // "" when its tools give absolute URLs
	Auth    *Auth  // nil: no credentials
	Headers []FixedHeader
	TLS     *TLSSpec // nil: the system's roots, no client certificate
}

// FixedHeader is a header a connection sends on every request; its value may be a secret.
type FixedHeader struct {
	Name  string
	Value Secret
}

// Auth kinds.
const (
	AuthBearer = "bearer"
	AuthBasic  = "basic"
	AuthHeader = "header"
	AuthOAuth2 = "oauth2"
)

// Auth is a connection's credentials: exactly one kind is set.
type Auth struct {
	Kind     string
	Bearer   Secret // AuthBearer
	Username Secret // AuthBasic
	Password Secret // AuthBasic
	Header   string // AuthHeader: the header's name
	Value    Secret // AuthHeader
	OAuth2   *OAuth2Spec
}

// OAuth2Spec is the client credentials grant.
type OAuth2Spec struct {
	TokenURL     string
	ClientID     Secret
	ClientSecret Secret
	Scopes       []string
	AuthStyle    string // "" (the library detects it), "basic" or "post"
}

// TLSSpec is a private CA and a client certificate (mTLS). Paths are absolute once loaded.
type TLSSpec struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

// Secrets returns every secret of the connection, in a stable order.
func (c *Connection) Secrets() []Secret {
	if c == nil {
		return nil
	}
	var out []Secret
	if a := c.Auth; a != nil {
		out = append(out, a.Bearer, a.Username, a.Password, a.Value)
		if a.OAuth2 != nil {
			out = append(out, a.OAuth2.ClientID, a.OAuth2.ClientSecret)
		}
	}
	for _, h := range c.Headers {
		out = append(out, h.Value)
	}
	return slices.DeleteFunc(out, func(s Secret) bool { return s.IsZero() || s.Literal != "" })
}

// TenantSecrets names the {tenant: …} secrets the connection needs.
func (c *Connection) TenantSecrets() []string {
	var out []string
	for _, s := range c.Secrets() {
		if s.Tenant != "" && !slices.Contains(out, s.Tenant) {
			out = append(out, s.Tenant)
		}
	}
	return out
}

// TLSConfig is the connection's client TLS settings, or nil for the defaults. It reads the
// files named by the tools file.
func (c *Connection) TLSConfig() (*tls.Config, error) {
	if c == nil || c.TLS == nil {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLS.CAFile != "" {
		pem, err := os.ReadFile(c.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file: %s holds no PEM certificate", c.TLS.CAFile)
		}
		cfg.RootCAs = pool
	}
	if c.TLS.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLS.CertFile, c.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.cert_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// rawConnection mirrors a connection as written. Secrets are decoded as any: a string
// (literal) or a one-member mapping (a reference).
type rawConnection struct {
	Name    string   `yaml:"name"`
	BaseURL string   `yaml:"base_url"`
	Auth    *rawAuth `yaml:"auth"`
	Headers any      `yaml:"headers"`
	TLS     *rawTLS  `yaml:"tls"`
}

type rawAuth struct {
	Bearer any        `yaml:"bearer"`
	Basic  *rawBasic  `yaml:"basic"`
	Header *rawHeader `yaml:"header"`
	OAuth2 *rawOAuth2 `yaml:"oauth2"`
}

type rawBasic struct {
	Username any `yaml:"username"`
	Password any `yaml:"password"`
}

type rawHeader struct {
	Name  string `yaml:"name"`
	Value any    `yaml:"value"`
}

type rawOAuth2 struct {
	TokenURL     string   `yaml:"token_url"`
	ClientID     any      `yaml:"client_id"`
	ClientSecret any      `yaml:"client_secret"`
	Scopes       []string `yaml:"scopes"`
	AuthStyle    string   `yaml:"auth_style"`
}

type rawTLS struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

var connectionNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// ConnectionError is a problem with one connection of the tools file.
type ConnectionError struct {
	Connection string
	Index      int
	Field      string
	Err        error
}

// Error formats the problem as `tools file: connection "stripe": auth.bearer: ...`.
func (e *ConnectionError) Error() string {
	msg := "tools file: "
	if e.Connection != "" {
		msg += fmt.Sprintf("connection %q: ", e.Connection)
	} else {
		msg += fmt.Sprintf("connection #%d: ", e.Index)
	}
	if e.Field != "" {
		msg += e.Field + ": "
	}
	return msg + e.Err.Error()
}

// Unwrap returns the underlying problem.
func (e *ConnectionError) Unwrap() error { return e.Err }

// connectionChecks is what Load checks connections against.
type connectionChecks struct {
	getenv func(string) string
	dir    string // relative TLS and secret file paths are relative to it
	// unsent: nothing is sent through the connection (Options.SendsNothing), so its secrets
	// and TLS files are named but not read.
	unsent bool
}

func buildConnection(raw *rawConnection, index int, chk connectionChecks) (*Connection, []error) {
	var errs []error
	add := func(field string, format string, args ...any) {
		errs = append(errs, &ConnectionError{Connection: raw.Name, Index: index, Field: field, Err: fmt.Errorf(format, args...)})
	}
	c := &Connection{Name: raw.Name}
	if !connectionNameRE.MatchString(raw.Name) {
		add("name", "invalid name %q: want %s", raw.Name, connectionNameRE)
	}
	if raw.BaseURL != "" {
		u, err := url.Parse(raw.BaseURL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			add("base_url", "invalid URL %q: want an absolute http or https URL", raw.BaseURL)
		case u.User != nil:
			add("base_url", "invalid URL %q: credentials in the URL are not allowed; use auth", raw.BaseURL)
		case u.RawQuery != "" || u.Fragment != "" || strings.Contains(raw.BaseURL, "{{"):
			add("base_url", "invalid URL %q: a base URL has no query, fragment or template", raw.BaseURL)
		default:
			c.BaseURL = strings.TrimRight(raw.BaseURL, "/")
		}
	}
	secret := func(field string, v any, literalOK bool) Secret {
		s, err := parseSecret(v, literalOK, chk)
		if err != nil {
			add(field, "%v", err)
		}
		return s
	}
	if raw.Auth != nil {
		c.Auth = buildAuth(raw.Auth, secret, add)
	}
	c.Headers = fixedHeaders(raw.Headers, chk, add)
	if t := raw.TLS; t != nil {
		spec := &TLSSpec{CAFile: chk.path(t.CAFile), CertFile: chk.path(t.CertFile), KeyFile: chk.path(t.KeyFile)}
		if (spec.CertFile == "") != (spec.KeyFile == "") {
			add("tls", "cert_file and key_file go together")
		}
		c.TLS = spec
		if len(errs) == 0 && !chk.unsent {
			if _, err := c.TLSConfig(); err != nil {
				add("", "%v", err)
			}
		}
	}
	return c, errs
}

// buildAuth checks a connection's auth: exactly one kind, its secrets references.
func buildAuth(a *rawAuth, secret func(field string, v any, literalOK bool) Secret, add func(string, string, ...any)) *Auth {
	auth := &Auth{}
	kinds := 0
	if a.Bearer != nil {
		kinds++
		auth.Kind, auth.Bearer = AuthBearer, secret("auth.bearer", a.Bearer, false)
	}
	if a.Basic != nil {
		kinds++
		auth.Kind = AuthBasic
		auth.Username = secret("auth.basic.username", a.Basic.Username, true)
		auth.Password = secret("auth.basic.password", a.Basic.Password, false)
	}
	if a.Header != nil {
		kinds++
		auth.Kind = AuthHeader
		switch h := http.CanonicalHeaderKey(a.Header.Name); {
		case !isToken(a.Header.Name):
			add("auth.header.name", "invalid header name %q", a.Header.Name)
		case slices.Contains(reservedHeaders, h):
			add("auth.header.name", "%q is set by idemgate itself", a.Header.Name)
		default:
			auth.Header = h
		}
		auth.Value = secret("auth.header.value", a.Header.Value, false)
	}
	if o := a.OAuth2; o != nil {
		kinds++
		auth.Kind = AuthOAuth2
		spec := &OAuth2Spec{TokenURL: o.TokenURL, Scopes: o.Scopes, AuthStyle: o.AuthStyle}
		if u, err := url.Parse(o.TokenURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("auth.oauth2.token_url", "invalid URL %q: want an absolute http or https URL", o.TokenURL)
		}
		spec.ClientID = secret("auth.oauth2.client_id", o.ClientID, true)
		spec.ClientSecret = secret("auth.oauth2.client_secret", o.ClientSecret, false)
		if o.AuthStyle != "" && o.AuthStyle != "basic" && o.AuthStyle != "post" {
			add("auth.oauth2.auth_style", "invalid %q: want basic or post (or leave it out to detect it)", o.AuthStyle)
		}
		auth.OAuth2 = spec
	}
	switch kinds {
	case 0:
		add("auth", "give one of bearer, basic, header or oauth2")
	case 1:
		return auth
	default:
		add("auth", "give only one of bearer, basic, header or oauth2")
	}
	return nil
}

func fixedHeaders(raw any, chk connectionChecks, add func(string, string, ...any)) []FixedHeader {
	if raw == nil {
		return nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		add("headers", "expected a mapping of header names to values")
		return nil
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []FixedHeader
	for _, name := range names {
		field := "headers." + name
		canon := http.CanonicalHeaderKey(name)
		switch {
		case !isToken(name):
			add(field, "invalid header name %q", name)
			continue
		case slices.Contains(reservedHeaders, canon):
			add(field, "%q is set by idemgate itself", name)
			continue
		}
		s, err := parseSecret(m[name], true, chk)
		if err != nil {
			add(field, "%v", err)
			continue
		}
		out = append(out, FixedHeader{Name: canon, Value: s})
	}
	return out
}

// SecretNameRE is the syntax of a tenant secret's name.
var SecretNameRE = connectionNameRE

// NeedsDataKey returns, as a tools-file error, every connection that uses a {tenant: …}
// secret: those are sealed under IDEMGATE_DATA_KEY, so without one the gateway must not start.
func (c *Catalog) NeedsDataKey() error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, conn := range c.connections {
		for _, name := range conn.TenantSecrets() {
			errs = append(errs, &ConnectionError{Connection: conn.Name, Field: "{tenant: " + name + "}",
				Err: errors.New("tenant secrets are sealed under IDEMGATE_DATA_KEY, which is not set")})
		}
	}
	return errors.Join(errs...)
}

// Connections returns the connections in file order.
func (c *Catalog) Connections() []*Connection {
	if c == nil {
		return nil
	}
	return slices.Clone(c.connections)
}
