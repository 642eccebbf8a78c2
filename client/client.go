package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of a Client.
const (
	DefaultWait           = 10 * time.Second // Prefer: wait on each submit
	DefaultInitialBackoff = 200 * time.Millisecond
	DefaultMaxBackoff     = 10 * time.Second
	maxWait               = 60 * time.Second // the longest wait the gateway applies
	// answerMargin is how much longer than its wait a request may take before it counts as
	// lost: the gateway answers within the wait, plus the time to send the answer.
	answerMargin = 15 * time.Second
)

// Client calls one idemgate gateway with one API key.
type Client struct {
	base     *url.URL
	apiKey   string
	http     *http.Client
	wait     time.Duration
	initial  time.Duration
	max      time.Duration
	maxTries int
	jitter   func(n int64) int64 // uniform in [0, n)
	// pause waits d between tries, or until ctx ends (sleep; tests see each wait instead).
	pause func(ctx context.Context, d time.Duration) error
}

// Option changes a Client.
type Option func(*Client)

// WithHTTPClient sends requests with hc (default: a client of its own, without timeout; each
// request is bounded by its wait).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithWait sets how long each submit asks the gateway to wait for a terminal outcome
// (Prefer: wait=N, 0 to 60 s; default 10 s). Do keeps waiting beyond it by polling.
func WithWait(d time.Duration) Option {
	return func(c *Client) { c.wait = min(max(d, 0), maxWait) }
}

// WithBackoff sets the exponential backoff between tries: the n-th retry waits a uniformly
// random time between 0 and min(max, initial·2ⁿ) (full jitter), and at least as long as the
// gateway's Retry-After.
func WithBackoff(initial, max time.Duration) Option {
	return func(c *Client) {
		if initial > 0 && max >= initial {
			c.initial, c.max = initial, max
		}
	}
}

// WithMaxAttempts bounds how many times a request is sent when it fails in a way that leaves
// the outcome open (transport errors, 429, 5xx). Zero, the default, tries until the context
// ends. Waiting for an operation that is in progress does not count.
func WithMaxAttempts(n int) Option { return func(c *Client) { c.maxTries = max(n, 0) } }

// New returns a client of the gateway at baseURL (such as "http://127.0.0.1:8080") that
// authenticates with apiKey.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("client: base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q is not an absolute http(s) URL", baseURL)
	}
	c := &Client{base: u, apiKey: apiKey, http: &http.Client{}, wait: DefaultWait,
		initial: DefaultInitialBackoff, max: DefaultMaxBackoff, jitter: rand.Int64N, pause: sleep}
	for _, opt := range opts {
		opt(c)
	}
	return c, nil
}

// backoff is how long to wait before retry number try (0 for the first retry): full jitter
// over an exponentially growing ceiling, and never less than the gateway asked for.
func (c *Client) backoff(try int, retryAfter time.Duration) time.Duration {
	ceiling := c.initial
	for i := 0; i < try && ceiling < c.max; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, c.max)
	return max(time.Duration(c.jitter(int64(ceiling)+1)), retryAfter)
}
