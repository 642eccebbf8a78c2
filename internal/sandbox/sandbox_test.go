package sandbox_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/sandbox"
)

// client talks to a sandbox over real HTTP.
type client struct {
	t    *testing.T
	base string
	hc   *http.Client
}

// start serves a fresh sandbox on a loopback port.
func start(t *testing.T) (*sandbox.Sandbox, client) {
	t.Helper()
	sb := sandbox.New()
	srv := httptest.NewServer(sb)
	t.Cleanup(srv.Close)
	return sb, client{t: t, base: srv.URL, hc: srv.Client()}
}

// with returns the client using hc instead, for tests that need a timeout or fresh connections.
func (c client) with(hc *http.Client) client { c.hc = hc; return c }

// do sends one request; hdr holds header name/value pairs.
func (c client) do(method, path, body string, hdr ...string) (*http.Response, []byte, error) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// must is do for requests that must get an answer.
func (c client) must(method, path, body string, hdr ...string) (*http.Response, []byte) {
	c.t.Helper()
	resp, b, err := c.do(method, path, body, hdr...)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp, b
}

// obj decodes a JSON object answer.
func obj(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, b)
	}
	return m
}

func wantStatus(t *testing.T, resp *http.Response, b []byte, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, want, b)
	}
}

func wantCommitted(t *testing.T, sb *sandbox.Sandbox, kind string, want int) {
	t.Helper()
	if got := sb.Committed(kind); got != want {
		t.Fatalf("Committed(%q) = %d, want %d", kind, got, want)
	}
}

func TestHeadersAreRecorded(t *testing.T) {
	sb, c := start(t)
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	body := `{"subject":"printer on fire"}`
	c.must("POST", "/tickets?x=1", body,
		"X-Request-Id", "att-1", "X-Idemgate-Operation", "op-1", "traceparent", tp,
		"Idempotency-Key", "key-1", "Authorization", "Bearer secret")
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeError, Count: 1})
	c.must("GET", "/tickets?reference=op-1", "")

	reqs := sb.Requests("/tickets")
	if len(reqs) != 2 {
		t.Fatalf("recorded %d requests, want 2", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/tickets" || r.Query != "x=1" || string(r.Body) != body || r.At.IsZero() {
		t.Errorf("recorded %+v", r)
	}
	for k, want := range map[string]string{
		"X-Request-Id": "att-1", "X-Idemgate-Operation": "op-1", "traceparent": tp, "Idempotency-Key": "key-1",
	} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if r.Header.Get("Authorization") != "" {
		t.Error("recorded a header outside the four it should keep")
	}
	if r.Fault != "" || reqs[1].Fault != sandbox.ModeError || reqs[1].Method != "GET" {
		t.Errorf("faults recorded as %q, %q", r.Fault, reqs[1].Fault)
	}
	// The returned slices are copies: changing them must not change the record.
	r.Header.Set("X-Request-Id", "changed")
	if sb.Requests("/tickets")[0].Header.Get("X-Request-Id") != "att-1" {
		t.Error("Requests returned the sandbox's own header map")
	}
	if n := len(sb.Requests("")); n != 2 {
		t.Errorf("Requests(\"\") = %d, want 2", n)
	}
}

func TestStats(t *testing.T) {
	sb, c := start(t)
	c.must("POST", "/tickets", `{"subject":"a"}`)
	c.must("POST", "/refunds", `{"order_id":"o1","amount_cents":5,"currency":"EUR"}`)
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeThrottle, Path: "/emails"})
	c.must("POST", "/emails", `{"to":"a@b.c","subject":"s","body":"b"}`)

	resp, b := c.must("GET", "/_stats", "")
	wantStatus(t, resp, b, 200)
	var st struct {
		Committed     map[string]int `json:"committed"`
		Requests      int            `json:"requests"`
		FaultsApplied int            `json:"faults_applied"`
		ActiveFaults  int            `json:"active_faults"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"tickets": 1, "refunds": 1, "emails": 0, "closes": 0}
	for k, v := range want {
		if st.Committed[k] != v {
			t.Errorf("committed %s = %d, want %d (%s)", k, st.Committed[k], v, b)
		}
	}
	if st.Requests != 4 || st.FaultsApplied != 1 || st.ActiveFaults != 1 {
		t.Errorf("stats %s", b)
	}
}

func TestRoutingErrors(t *testing.T) {
	_, c := start(t)
	resp, b := c.must("GET", "/nope", "")
	wantStatus(t, resp, b, 404)
	if obj(t, b)["error"] != "not found" {
		t.Errorf("body %s", b)
	}
	resp, b = c.must("DELETE", "/tickets", "")
	wantStatus(t, resp, b, 405)
	if resp.Header.Get("Allow") != "GET, POST" {
		t.Errorf("Allow = %q", resp.Header.Get("Allow"))
	}
	resp, b = c.must("POST", "/tickets", strings.Repeat("x", 2<<20))
	wantStatus(t, resp, b, 413)
}

func TestBadRequestsCommitNothing(t *testing.T) {
	sb, c := start(t)
	cases := []struct{ path, body string }{
		{"/tickets", `{"subject":`},
		{"/tickets", ``},
		{"/tickets", `[]`},
		{"/tickets", `{"body":"no subject"}`},
		{"/tickets", `{"subject":"  "}`},
		{"/tickets", `{"subject":42}`},
		{"/refunds", `{"amount_cents":100,"currency":"EUR"}`},
		{"/refunds", `{"order_id":"o1","currency":"EUR"}`},
		{"/refunds", `{"order_id":"o1","amount_cents":0,"currency":"EUR"}`},
		{"/refunds", `{"order_id":"o1","amount_cents":1.5,"currency":"EUR"}`},
		{"/refunds", `{"order_id":"o1","amount_cents":"100","currency":"EUR"}`},
		{"/refunds", `{"order_id":"o1","amount_cents":100}`},
		{"/emails", `{"subject":"s","body":"b"}`},
		{"/emails", `{"to":"a@b.c","body":"b"}`},
		{"/emails", `{"to":"a@b.c","subject":"s"}`},
		{"/tickets/T-1001/close", `{"reason":`},
	}
	for _, tc := range cases {
		resp, b := c.must("POST", tc.path, tc.body)
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("POST %s %s: %d %s", tc.path, tc.body, resp.StatusCode, b)
			continue
		}
		if msg, _ := obj(t, b)["error"].(string); msg == "" {
			t.Errorf("POST %s %s: no error message: %s", tc.path, tc.body, b)
		}
	}
	for _, k := range []string{"tickets", "refunds", "emails", "closes"} {
		wantCommitted(t, sb, k, 0)
	}
}

func TestPage(t *testing.T) {
	sb, c := start(t)
	c.must("POST", "/tickets", `{"subject":"<b>bold</b>"}`, "X-Idemgate-Operation", "op-page")
	c.must("POST", "/refunds", `{"order_id":"o1","amount_cents":250,"currency":"EUR","card_number":"4111 1111 1111 1234"}`)
	c.must("POST", "/emails", `{"to":"a@example.com","subject":"hello","body":"b"}`)
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Path: "/refunds", Delay: 1500 * time.Millisecond})

	resp, b := c.must("GET", "/", "")
	wantStatus(t, resp, b, 200)
	page := string(b)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{"T-1001", "op-page", "&lt;b&gt;bold&lt;/b&gt;", "R-5001", "1234", "E-1",
		"a@example.com", "delay", "/refunds", "1.5s", "drop_after_commit"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, bad := range []string{"<b>bold", "<script", "4111", "http://", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	resp, b = c.must("GET", "/_help", "")
	wantStatus(t, resp, b, 200)
	if !strings.Contains(string(b), "hang_after_commit") {
		t.Errorf("usage text: %s", b)
	}
}

func TestMountedUnderPrefix(t *testing.T) {
	sb := sandbox.New()
	mux := http.NewServeMux()
	mux.Handle("/sandbox/", http.StripPrefix("/sandbox", sb))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := client{t: t, base: srv.URL + "/sandbox", hc: srv.Client()}

	resp, b := c.must("POST", "/tickets", `{"subject":"mounted"}`, "X-Idemgate-Operation", "op-m")
	wantStatus(t, resp, b, 201)
	resp, b = c.must("GET", "/tickets?reference=op-m", "")
	wantStatus(t, resp, b, 200)
	resp, b = c.must("GET", "/", "")
	wantStatus(t, resp, b, 200)
	if got := sb.Requests("/tickets"); len(got) != 2 || got[0].Path != "/tickets" {
		t.Errorf("recorded %+v", got)
	}
}

// TestConcurrentMixedLoad gives the race detector every path at once.
func TestConcurrentMixedLoad(t *testing.T) {
	sb, c := start(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			c.do("POST", "/tickets", `{"subject":"s"}`, "Idempotency-Key", []string{"a", "b"}[i%2])
			c.do("POST", "/refunds", `{"order_id":"o","amount_cents":1,"currency":"EUR"}`)
			c.do("POST", "/emails", `{"to":"a@b.c","subject":"s","body":"b"}`)
			c.do("POST", "/tickets/T-1001/close", `{"reason":"r"}`)
			c.do("GET", "/", "")
			c.do("GET", "/_stats", "")
			c.do("GET", "/_faults", "")
			sb.AddFault(sandbox.Fault{Mode: sandbox.ModeReject, Path: "/emails", Count: 1})
			_ = sb.Requests("/")
			_ = sb.Faults()
			if i%4 == 0 {
				sb.ClearFaults()
			}
		})
	}
	wg.Wait()
	wantCommitted(t, sb, "tickets", 2)
	wantCommitted(t, sb, "refunds", 16)
	wantCommitted(t, sb, "closes", 1)
	if got := len(sb.Requests("")); got != 16*7 {
		t.Errorf("recorded %d requests, want %d", got, 16*7)
	}
}
