package jobs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"
)

// maxResultBytes bounds what is read from a downstream answer. A larger 2xx body counts as
// unreadable, hence ambiguous: we will not record a truncated result as the truth.
const maxResultBytes = 1 << 20

// Call is one request to a downstream.
type Call struct {
	Method  string
	URL     string
	Body    []byte // nil for GET
	Header  http.Header
	Timeout time.Duration
}

// Response is what the connector saw. Err is a transport error (nothing usable came back);
// BodyErr an error reading a body whose status line did arrive.
type Response struct {
	Status     int
	Body       []byte
	RetryAfter time.Duration
	Wrote      bool // the request's headers left this process
	Err        error
	BodyErr    error
	Latency    time.Duration
}

// Connector sends attempts downstream over HTTP.
type Connector struct {
	client *http.Client
}

// NewConnector returns a connector with its own transport. Redirects are never followed: a
// URL comes from the tools file alone, never from a downstream's Location header.
func NewConnector() *Connector {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	// Shorter than common server idle timeouts, so we rarely write into a connection the
	// server has just closed (which would look ambiguous).
	tr.IdleConnTimeout = 30 * time.Second
	return &Connector{client: &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Do sends c and reads the answer. It never returns an error: every failure is described in
// the Response for the classifier.
func (cn *Connector) Do(ctx context.Context, c Call) (r Response) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	// WroteHeaders runs on the transport's writer goroutine, which may outlive Do on error
	// paths: hence the atomic.
	var wrote atomic.Bool
	defer func() { r.Wrote = wrote.Load() }()
	trace := &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }}
	ctx = httptrace.WithClientTrace(ctx, trace)

	var body io.Reader
	if c.Body != nil {
		body = bytes.NewReader(c.Body)
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, c.URL, body)
	if err != nil {
		r.Err = fmt.Errorf("build request: %w", err)
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
	if c.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")

	start := time.Now()
	resp, err := cn.client.Do(req)
	if err != nil {
		r.Latency = time.Since(start)
		r.Err = err
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
