package jobs_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/downstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callTimeout bounds every connector call in these tests.
const callTimeout = 5 * time.Second

// postCall is a POST of a small JSON body to url, as the executor sends one.
func postCall(url string) downstream.Call {
	return downstream.Call{Method: http.MethodPost, URL: url, Body: []byte(`{"subject":"x"}`), Header: http.Header{}, Timeout: callTimeout}
}

// classify runs the classifier on what the connector saw.
func classify(r downstream.Response) jobs.Class {
	return jobs.Classify(r.Status, r.Wrote, r.Err, r.BodyErr)
}

// closeAfterReading reads the whole request, then drops the connection without answering: the
// downstream may have committed, and we will never know from this connection.
func closeAfterReading(t *testing.T, w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	conn, _, err := http.NewResponseController(w).Hijack()
	if !assert.NoError(t, err) {
		return
	}
	_ = conn.Close()
}

func TestConnectorRefusedIsNotSent(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	r := downstream.NewConnector().Do(context.Background(), postCall("http://"+addr+"/tickets"))
	require.Error(t, r.Err)
	assert.False(t, r.Wrote, "nothing was written to a refused connection")
	assert.Zero(t, r.Status)
	assert.Equal(t, jobs.NotSent, classify(r))
}

func TestConnectorConnectionClosedAfterRequestIsAmbiguous(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		closeAfterReading(t, w, r)
	}))
	defer srv.Close()

	r := downstream.NewConnector().Do(context.Background(), postCall(srv.URL+"/tickets"))
	require.Error(t, r.Err)
	assert.True(t, r.Wrote, "the request left before the connection dropped")
	assert.Equal(t, jobs.Ambiguous, classify(r))
}

func TestConnectorHangPastTimeoutIsAmbiguous(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	call := postCall(srv.URL + "/tickets")
	call.Timeout = 200 * time.Millisecond
	r := downstream.NewConnector().Do(context.Background(), call)
	// The server answers only once released, and that happens after Do returns: Do came back
	// because the call's timeout ended the wait, the one deadline in play.
	require.Error(t, r.Err)
	assert.ErrorIs(t, r.Err, context.DeadlineExceeded, "the call timeout bounds the wait")
	assert.True(t, r.Wrote)
	assert.Equal(t, jobs.Ambiguous, classify(r))
}

func TestConnectorRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		header func() string
		status int
		min    time.Duration
		max    time.Duration
	}{
		{"429 with delta-seconds", func() string { return "2" }, http.StatusTooManyRequests, 2 * time.Second, 2 * time.Second},
		{"503 with an HTTP date", func() string { return time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat) },
			http.StatusServiceUnavailable, 28 * time.Second, 30 * time.Second},
		{"429 with a date in the past", func() string { return time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat) },
			http.StatusTooManyRequests, 0, 0},
		{"429 with garbage", func() string { return "soon" }, http.StatusTooManyRequests, 0, 0},
		{"429 with a negative number", func() string { return "-5" }, http.StatusTooManyRequests, 0, 0},
		{"429 without the header", func() string { return "" }, http.StatusTooManyRequests, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if v := tc.header(); v != "" {
					w.Header().Set("Retry-After", v)
				}
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			r := downstream.NewConnector().Do(context.Background(), postCall(srv.URL))
			require.NoError(t, r.Err)
			assert.Equal(t, tc.status, r.Status)
			assert.GreaterOrEqual(t, r.RetryAfter, tc.min)
			assert.LessOrEqual(t, r.RetryAfter, tc.max)
			assert.Equal(t, jobs.Throttled, classify(r))
		})
	}
}

func TestConnectorDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/tickets", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, _ *http.Request) {
		followed.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	r := downstream.NewConnector().Do(context.Background(), postCall(srv.URL+"/tickets"))
	require.NoError(t, r.Err)
	assert.Equal(t, http.StatusFound, r.Status)
	assert.Zero(t, followed.Load(), "a Location header never chooses where idemgate sends requests")
	assert.Equal(t, jobs.Ambiguous, classify(r))
}

func TestConnectorBodyLimit(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	tests := []struct {
		name    string
		size    int
		wantErr bool
		want    jobs.Class
	}{
		{"exactly 1 MiB is read", limit, false, jobs.Succeeded},
		{"over 1 MiB is unreadable, hence ambiguous", limit + 1, true, jobs.Ambiguous},
		{"far over 1 MiB is unreadable, hence ambiguous", 4 * limit, true, jobs.Ambiguous},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write(bytes.Repeat([]byte("a"), tc.size))
			}))
			defer srv.Close()
			r := downstream.NewConnector().Do(context.Background(), postCall(srv.URL))
			require.NoError(t, r.Err)
			assert.Equal(t, http.StatusOK, r.Status)
			assert.Equal(t, tc.wantErr, r.BodyErr != nil, "BodyErr: %v", r.BodyErr)
			assert.Equal(t, tc.want, classify(r))
			if !tc.wantErr {
				assert.Len(t, r.Body, tc.size)
			}
		})
	}
}

func TestConnectorSendsHeadersAndBody(t *testing.T) {
	t.Parallel()
	type seen struct {
		method string
		header http.Header
		body   []byte
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Header.Clone(), b}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"T-1"}`)
	}))
	defer srv.Close()

	call := postCall(srv.URL + "/tickets")
	call.Header.Set("X-Idemgate-Operation", "op_1")
	call.Header.Set("X-Request-Id", "att_1")
	call.Header.Set("Traceparent", "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01")
	call.Header.Set("Idempotency-Key", "op_1")
	before := call.Header.Clone()
	r := downstream.NewConnector().Do(context.Background(), call)
	require.NoError(t, r.Err)
	assert.Equal(t, http.StatusCreated, r.Status)
	assert.Equal(t, `{"id":"T-1"}`, string(r.Body))
	assert.Equal(t, jobs.Succeeded, classify(r))
	assert.Positive(t, r.Latency)
	assert.Equal(t, before, call.Header, "the caller's headers are not modified")

	s := <-got
	assert.Equal(t, http.MethodPost, s.method)
	assert.Equal(t, `{"subject":"x"}`, string(s.body))
	for name, want := range map[string]string{
		"X-Idemgate-Operation": "op_1",
		"X-Request-Id":         "att_1",
		"Traceparent":          "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01",
		"Idempotency-Key":      "op_1",
		"Content-Type":         "application/json",
		"Accept":               "application/json",
	} {
		assert.Equal(t, want, s.header.Get(name), name)
	}
}

func TestConnectorGetSendsNoBody(t *testing.T) {
	t.Parallel()
	var contentType, body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body.Store(string(b))
		contentType.Store(r.Header.Get("Content-Type"))
		_, _ = io.WriteString(w, `{"found":true}`)
	}))
	defer srv.Close()
	r := downstream.NewConnector().Do(context.Background(), downstream.Call{Method: http.MethodGet, URL: srv.URL, Header: http.Header{}, Timeout: callTimeout})
	require.NoError(t, r.Err)
	assert.Equal(t, jobs.Succeeded, classify(r))
	assert.Equal(t, "", body.Load())
	assert.Equal(t, "", contentType.Load())
}

// TestConnectorNilHeaderDoesNotPanic: Do promises to describe every failure in the Response;
// a Call without a Header is a plausible input (Header is not documented as required).
func TestConnectorNilHeaderDoesNotPanic(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	var r downstream.Response
	require.NotPanics(t, func() {
		r = downstream.NewConnector().Do(context.Background(), downstream.Call{Method: http.MethodGet, URL: srv.URL, Timeout: callTimeout})
	})
	assert.Equal(t, http.StatusNoContent, r.Status)
}

// closingServer answers /ok normally over keep-alive and answers /drop by reading the request
// and closing the connection. It counts arrivals at /drop and the connections it accepted.
type closingServer struct {
	*httptest.Server
	drops       atomic.Int32
	connections atomic.Int32
}

// newClosingServer starts a closingServer for t.
func newClosingServer(t *testing.T) *closingServer {
	cs := &closingServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	mux.HandleFunc("/drop", func(w http.ResponseWriter, r *http.Request) {
		cs.drops.Add(1)
		closeAfterReading(t, w, r)
	})
	cs.Server = httptest.NewUnstartedServer(mux)
	cs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			cs.connections.Add(1)
		}
	}
	cs.Start()
	t.Cleanup(cs.Close)
	return cs
}

// reuseTrace records whether requests went out on a pooled connection. The connector's own
// trace is composed with it (httptrace.WithClientTrace keeps earlier hooks).
type reuseTrace struct {
	mu     sync.Mutex
	reused []bool
}

func (rt *reuseTrace) ctx() context.Context {
	return httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		rt.reused = append(rt.reused, i.Reused)
	}})
}

func (rt *reuseTrace) get() []bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]bool(nil), rt.reused...)
}

// TestConnectorDoesNotResendPostOnReusedConnection: net/http silently resends a request that
// fails on a reused keep-alive connection when it can rewind the body and the request looks
// idempotent, which includes any POST carrying Idempotency-Key. Every send must be an attempt
// idemgate records, so the connector must never let that happen.
func TestConnectorDoesNotResendPostOnReusedConnection(t *testing.T) {
	t.Parallel()
	cs := newClosingServer(t)
	cn := downstream.NewConnector()
	var trace reuseTrace
	ctx := trace.ctx()

	first := postCall(cs.URL + "/ok")
	first.Header.Set("Idempotency-Key", "op_1")
	r := cn.Do(ctx, first)
	require.NoError(t, r.Err)
	require.Equal(t, http.StatusOK, r.Status)

	second := postCall(cs.URL + "/drop")
	second.Header.Set("Idempotency-Key", "op_2")
	r = cn.Do(ctx, second)
	require.Error(t, r.Err)
	assert.True(t, r.Wrote)
	assert.Equal(t, jobs.Ambiguous, classify(r))

	assert.Equal(t, []bool{false, true}, trace.get(), "the second request must ride the pooled connection")
	assert.Equal(t, int32(1), cs.drops.Load(), "the dropped POST reached the server exactly once")
	assert.Equal(t, int32(1), cs.connections.Load(), "no second connection was opened to resend it")
}

// TestStockClientResendsPostWithIdempotencyKey is the control for the test above: it shows
// that the scenario really triggers the transport's silent resend when the body can be
// rewound, so the connector's test is not passing vacuously.
func TestStockClientResendsPostWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	cs := newClosingServer(t)
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	post := func(path string) error {
		req, err := http.NewRequest(http.MethodPost, cs.URL+path, strings.NewReader(`{"subject":"x"}`))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "k")
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return err
	}
	require.NoError(t, post("/ok"))
	require.Error(t, post("/drop"))
	assert.Equal(t, int32(2), cs.drops.Load(), "net/http resent the POST once on a fresh connection")
}

// tenantSecrets is a TenantSecrets of fixed values.
type tenantSecrets map[string]string

func (s tenantSecrets) TenantSecret(_ context.Context, tenant, name string) (string, error) {
	v, ok := s[tenant+"/"+name]
	if !ok {
		return "", fmt.Errorf("tenant %q has no secret %q", tenant, name)
	}
	return v, nil
}

// TestConnectorTenantSecret: a {tenant: …} secret is the call's tenant's, reported among the
// credentials to scrub; a secret the tenant lacks (gone since the call was accepted) means
// the request is not sent.
func TestConnectorTenantSecret(t *testing.T) {
	t.Parallel()
	var got atomic.Value
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		got.Store(r.Header.Get("X-Api-Key"))
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	conn := &catalog.Connection{Name: "payments", Auth: &catalog.Auth{Kind: catalog.AuthHeader, Header: "X-Api-Key",
		Value: catalog.Secret{Tenant: "payments_key"}}}
	cn := downstream.New(downstream.Config{TenantSecrets: tenantSecrets{"acme/payments_key": "acme-key-123"}})
	call := postCall(srv.URL)
	call.Connection, call.Tenant = conn, "acme"
	r := cn.Do(context.Background(), call)
	require.NoError(t, r.Err)
	assert.Equal(t, "acme-key-123", got.Load())
	assert.Contains(t, r.Credentials, "acme-key-123")

	call.Tenant = "globex"
	r = cn.Do(context.Background(), call)
	assert.Equal(t, jobs.NotSent, classify(r))
	assert.ErrorIs(t, r.Err, catalog.ErrSecretMissing)
	assert.Contains(t, r.Err.Error(), `"payments"`)
	assert.EqualValues(t, 1, calls.Load(), "nothing sent without the secret")
}

// TestConnectorBasicAuthAndFixedHeaders: basic auth and fixed headers go on the request, and
// every credential among them (the encoded pair too, which is what a downstream would echo)
// is reported for scrubbing; a literal fixed header is not a credential.
func TestConnectorBasicAuthAndFixedHeaders(t *testing.T) {
	t.Parallel()
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Clone())
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	conn := &catalog.Connection{Name: "twilio",
		Auth: &catalog.Auth{Kind: catalog.AuthBasic, Username: catalog.Secret{Literal: "AC123"}, Password: catalog.Secret{Tenant: "twilio_token"}},
		Headers: []catalog.FixedHeader{{Name: "X-Version", Value: catalog.Secret{Literal: "2010-04-01"}},
			{Name: "X-Extra", Value: catalog.Secret{Tenant: "extra"}}}}
	cn := downstream.New(downstream.Config{TenantSecrets: tenantSecrets{"acme/twilio_token": "tw-secret-987", "acme/extra": "extra-456"}})
	call := postCall(srv.URL)
	call.Connection, call.Tenant = conn, "acme"
	r := cn.Do(context.Background(), call)
	require.NoError(t, r.Err)
	h := got.Load().(http.Header)
	user, pass, ok := (&http.Request{Header: h}).BasicAuth()
	require.True(t, ok)
	assert.Equal(t, "AC123", user)
	assert.Equal(t, "tw-secret-987", pass)
	assert.Equal(t, "2010-04-01", h.Get("X-Version"))
	assert.Equal(t, "extra-456", h.Get("X-Extra"))
	assert.Contains(t, r.Credentials, "tw-secret-987")
	assert.Contains(t, r.Credentials, "extra-456")
	assert.Contains(t, r.Credentials, strings.TrimPrefix(h.Get("Authorization"), "Basic "))
	assert.NotContains(t, r.Credentials, "2010-04-01")
}
