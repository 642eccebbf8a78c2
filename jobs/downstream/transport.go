// Package downstream sends the gateway's requests to the systems its tools change (docs/STATES.md,
// docs/TOOLS.md): the transport and its TLS settings (this file), the credentials a connection
// presents (credentials.go, oauth2.go) and the encodings of a body (encoding.go). The
// executor hands it a Call and gets a Response back; it never learns how a credential was
// found or a body was spelled. Every credential a request carried comes back in
// Response.Credentials, for the executor's one scrubber to mask wherever it is echoed.
package downstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
)

// maxResultBytes bounds what is read from a downstream answer. A larger 2xx body counts as
// unreadable, hence ambiguous: we will not record a truncated result as the truth.
const maxResultBytes = 1 << 20

// Call is one request to a downstream.
type Call struct {
	Method string
	URL    string
	// Body is the params as JSON, nil for none; Encoding says how they are sent
	// (catalog.BodyJSON when "", catalog.BodyForm, catalog.BodyNone).
	Body     []byte
	Encoding string
	// KeyAt are JSON pointers into the body where Key (the downstream key) is written.
	KeyAt []string
	// Omit are top-level params the body leaves out: the ones the URL carries.
	Omit    []string
	Key     string
	Header  http.Header
	Timeout time.Duration
	// Connection is the connection the request goes through, nil for none; Tenant is the
	// tenant whose {tenant: …} secrets it uses.
	Connection *catalog.Connection
	Tenant     string
}

// Response is what the connector saw. Err is a transport error (nothing usable came back);
// BodyErr an error reading a body whose status line did arrive. Unbuildable says the request
// could not be made from the call at all (trying again would fail the same way).
type Response struct {
	Status      int
	Body        []byte
	RetryAfter  time.Duration
	Wrote       bool // the request's headers left this process
	Err         error
	BodyErr     error
	Unbuildable error
	Latency     time.Duration
	// AbortedAt is when the request's connection was reset because its answer was not read
	// to the end (a timeout, a cancel, a broken answer); zero when none was. No byte of the
	// request leaves this host after it (abort.go).
	AbortedAt time.Time
	// Credentials are the values of every credential the request carried (secrets, OAuth2
	// tokens, their encoded forms): the caller masks them in whatever it keeps of the answer.
	Credentials []string
}

// TenantSecrets reads a tenant's secret ({tenant: NAME}); the ledger implements it.
type TenantSecrets interface {
	TenantSecret(ctx context.Context, tenant, name string) (string, error)
}

// Connector sends attempts downstream over HTTP.
type Connector struct {
	base    *http.Transport
	client  *http.Client // requests without a connection, or one without TLS settings
	secrets TenantSecrets
	tokens  tokenCache

	mu      sync.Mutex
	clients map[*catalog.Connection]*http.Client
}

// Config wires a connector.
type Config struct {
	// TenantSecrets reads {tenant: …} secrets; nil: every such secret is missing.
	TenantSecrets TenantSecrets
	// Dial makes the connections (through the hosts' gates and guards all the same); nil: a
	// net.Dialer. Tests dial from a network namespace of their own with it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// NewConnector returns a connector that reads no tenant secrets.
func NewConnector() *Connector { return New(Config{}) }

// New returns a connector with its own transport. Redirects are never followed: a URL comes
// from the tools file alone, never from a downstream's Location header.
func New(cfg Config) *Connector {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	// Shorter than common server idle timeouts, so we rarely write into a connection the
	// server has just closed (which would look ambiguous).
	tr.IdleConnTimeout = 30 * time.Second
	// Every connection is guarded (abort.go), and carries one request at a time: HTTP/2 would
	// multiplex requests on one connection, and resetting it for one attempt's timeout would
	// cut the others (while a stream's own cancel leaves its data free to arrive).
	tr.DialContext = dialer(newHostGates(), cfg.Dial)
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	return &Connector{base: tr, client: newClient(tr), secrets: cfg.TenantSecrets,
		clients: map[*catalog.Connection]*http.Client{}}
}

func newClient(tr http.RoundTripper) *http.Client {
	return &http.Client{
		Transport:     guarded{base: tr},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// clientFor returns the client of a connection: its own transport when it has TLS settings
// (a private CA, a client certificate), read once.
func (cn *Connector) clientFor(c *catalog.Connection) (*http.Client, error) {
	if c == nil || c.TLS == nil {
		return cn.client, nil
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cl, ok := cn.clients[c]; ok {
		return cl, nil
	}
	cfg, err := c.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("connection %q: %w", c.Name, err)
	}
	tr := cn.base.Clone()
	tr.TLSClientConfig = cfg
	cl := newClient(tr)
	cn.clients[c] = cl
	return cl, nil
}

// Do sends c and reads the answer. It never returns an error: every failure is described in
// the Response for the classifier.
func (cn *Connector) Do(ctx context.Context, c Call) (r Response) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	ctx, att := WithAttempt(ctx, c.Timeout)
	// A call that ends without its answer read whole (a timeout, a cancel, a broken answer)
	// resets the connection still carrying its request before Do returns: the attempt is
	// over only when its request can no longer arrive.
	defer func() {
		if r.Err != nil || r.BodyErr != nil {
			r.AbortedAt = att.Abort()
		} else {
			att.release()
		}
	}()
	body, contentType, err := encodeBody(c)
	if err != nil {
		r.Unbuildable = err
		return r
	}
	client, err := cn.clientFor(c.Connection)
	if err != nil {
		r.Err = err
		return r
	}
	creds := cn.credentials(c)
	defer func() { r.Credentials = creds.values }()
	if err := creds.resolve(ctx, client); err != nil {
		r.Err = err
		return r
	}
	r = cn.send(ctx, client, c, body, contentType, creds)
	if r.Err == nil && r.Status == http.StatusUnauthorized && creds.refreshable() {
		// A 401 means the call was refused, so sending it again is safe: once, with a new
		// token (the cached one may have been revoked before it expired).
		if err := creds.refresh(ctx, client); err != nil {
			r.Err, r.Wrote = err, false
			return r
		}
		r = cn.send(ctx, client, c, body, contentType, creds)
	}
	return r
}

func (cn *Connector) send(ctx context.Context, client *http.Client, c Call, body []byte, contentType string, creds *credentials) (r Response) {
	// WroteHeaders runs on the transport's writer goroutine, which may outlive Do on error
	// paths: hence the atomic.
	var wrote atomic.Bool
	defer func() { r.Wrote = wrote.Load() }()
	trace := &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }}
	ctx = httptrace.WithClientTrace(ctx, trace)

	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, c.URL, rd)
	if err != nil {
		r.Unbuildable = fmt.Errorf("build request: %w", err)
		return r
	}
	// Without GetBody the transport cannot silently resend the request on another connection
	// (it does so for requests carrying Idempotency-Key): every send must be an attempt we
	// record.
	req.GetBody = nil
	req.Header = c.Header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	creds.apply(req.Header)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")

	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		r.Latency = time.Since(start)
		r.Err = err
		if down := (*HostDownError)(nil); errors.As(err, &down) {
			r.RetryAfter = max(time.Until(down.Until), 0) // held: nothing was sent
		}
		return r
	}
	defer resp.Body.Close()
	r.Status = resp.StatusCode
	r.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	r.Body, r.BodyErr = io.ReadAll(io.LimitReader(resp.Body, maxResultBytes+1))
	if r.BodyErr == nil && len(r.Body) > maxResultBytes {
		r.BodyErr = fmt.Errorf("answer larger than %d bytes", maxResultBytes)
	}
	r.Latency = time.Since(start)
	return r
}

// parseRetryAfter reads delta-seconds or an HTTP date; zero when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
