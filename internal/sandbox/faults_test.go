package sandbox_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/sandbox"
)

const refundBody = `{"order_id":"o-1","amount_cents":500,"currency":"EUR"}`

// fresh returns a client that opens a new connection per request. The transport silently
// retries a request carrying Idempotency-Key when a reused connection fails, which would hide
// the very failure a test is provoking.
func fresh(timeout time.Duration) *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: timeout}
}

func TestDropAfterCommit(t *testing.T) {
	sb, c := start(t)
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/refunds", Count: 1})
	if _, _, err := c.do("POST", "/refunds", refundBody, "X-Idemgate-Operation", "op-d"); err == nil {
		t.Fatal("the caller got an answer; want a dropped connection")
	}
	wantCommitted(t, sb, "refunds", 1)
	// Reconciliation finds what the caller never heard about.
	resp, b := c.must("GET", "/refunds?reference=op-d", "")
	wantStatus(t, resp, b, 200)
	if obj(t, b)["id"] != "R-5001" {
		t.Errorf("lookup %s", b)
	}
}

func TestDropAfterCommitThenKeyedRetry(t *testing.T) {
	sb, c := start(t)
	c = c.with(fresh(0))
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/tickets", Count: 1})
	if _, _, err := c.do("POST", "/tickets", `{"subject":"s"}`, "Idempotency-Key", "op-k"); err == nil {
		t.Fatal("the caller got an answer; want a dropped connection")
	}
	resp, b := c.must("POST", "/tickets", `{"subject":"s"}`, "Idempotency-Key", "op-k")
	wantStatus(t, resp, b, 201)
	if obj(t, b)["id"] != "T-1001" || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry %s", b)
	}
	wantCommitted(t, sb, "tickets", 1)
	reqs := sb.Requests("/tickets")
	if len(reqs) != 2 || reqs[0].Header.Get("Idempotency-Key") != reqs[1].Header.Get("Idempotency-Key") ||
		reqs[0].Fault != sandbox.ModeDropAfterCommit || reqs[1].Fault != "" {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestErrorModes(t *testing.T) {
	cases := []struct {
		mode       string
		retryAfter int
		status     int
		header     string // want Retry-After
		committed  int
		errMsg     string
	}{
		{sandbox.ModeErrorAfterCommit, 0, 500, "", 1, ""},
		{sandbox.ModeError, 0, 500, "", 0, ""},
		{sandbox.ModeThrottle, 0, 429, "1", 0, ""},
		{sandbox.ModeThrottle, 2, 429, "2", 0, ""},
		{sandbox.ModeUnavailable, 0, 503, "", 0, ""},
		{sandbox.ModeUnavailable, 3, 503, "3", 0, ""},
		{sandbox.ModeReject, 0, 422, "", 0, "rejected by sandbox"},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			sb, c := start(t)
			sb.AddFault(sandbox.Fault{Mode: tc.mode, RetryAfter: tc.retryAfter})
			resp, b := c.must("POST", "/refunds", refundBody)
			wantStatus(t, resp, b, tc.status)
			if got := resp.Header.Get("Retry-After"); got != tc.header {
				t.Errorf("Retry-After %q, want %q", got, tc.header)
			}
			if msg := obj(t, b)["error"]; msg == nil || tc.errMsg != "" && msg != tc.errMsg {
				t.Errorf("body %s", b)
			}
			wantCommitted(t, sb, "refunds", tc.committed)
		})
	}
}

func TestHang(t *testing.T) {
	sb, c := start(t)
	c = c.with(fresh(200 * time.Millisecond))
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeHang, Path: "/refunds"})
	began := time.Now()
	if _, _, err := c.do("POST", "/refunds", refundBody); err == nil {
		t.Fatal("the caller got an answer; want a timeout")
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	wantCommitted(t, sb, "refunds", 0)
}

func TestHangAfterCommit(t *testing.T) {
	sb, c := start(t)
	c = c.with(fresh(200 * time.Millisecond))
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeHangAfterCommit, Path: "/refunds"})
	if _, _, err := c.do("POST", "/refunds", refundBody); err == nil {
		t.Fatal("the caller got an answer; want a timeout")
	}
	wantCommitted(t, sb, "refunds", 1)
}

func TestHangWithDelayClosesUnanswered(t *testing.T) {
	sb, c := start(t)
	c = c.with(fresh(5 * time.Second))
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeHang, Delay: 100 * time.Millisecond})
	began := time.Now()
	if _, _, err := c.do("POST", "/tickets", `{"subject":"s"}`); err == nil {
		t.Fatal("the caller got an answer; want a closed connection")
	}
	if d := time.Since(began); d < 100*time.Millisecond || d > 2*time.Second {
		t.Errorf("closed after %v, want about 100ms", d)
	}
	wantCommitted(t, sb, "tickets", 0)
}

func TestClearFaultsReleasesHang(t *testing.T) {
	sb, c := start(t)
	c = c.with(fresh(5 * time.Second))
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeHang})
	time.AfterFunc(100*time.Millisecond, sb.ClearFaults)
	began := time.Now()
	if _, _, err := c.do("POST", "/tickets", `{"subject":"s"}`); err == nil {
		t.Fatal("the caller got an answer; want a closed connection")
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("released after %v", d)
	}
}

func TestDelay(t *testing.T) {
	sb, c := start(t)
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Delay: 150 * time.Millisecond, Count: 1})
	began := time.Now()
	resp, b := c.must("POST", "/tickets", `{"subject":"s"}`)
	wantStatus(t, resp, b, 201)
	if d := time.Since(began); d < 150*time.Millisecond {
		t.Errorf("answered after %v, want at least 150ms", d)
	}
	wantCommitted(t, sb, "tickets", 1)

	// A caller that gives up during the delay is not served: nothing commits.
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Delay: 300 * time.Millisecond, Count: 1})
	if _, _, err := c.with(fresh(50*time.Millisecond)).do("POST", "/tickets", `{"subject":"s"}`); err == nil {
		t.Fatal("want a client timeout")
	}
	time.Sleep(400 * time.Millisecond)
	wantCommitted(t, sb, "tickets", 1)
}

func TestCountAndFilters(t *testing.T) {
	sb, c := start(t)
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeError, Path: "/refunds", Count: 1})
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeThrottle, Path: "/ticket"}) // not a whole segment of /tickets
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeReject, Path: "/emails", Method: "GET"})

	resp, b := c.must("POST", "/tickets", `{"subject":"s"}`)
	wantStatus(t, resp, b, 201)
	resp, b = c.must("POST", "/emails", `{"to":"a@b.c","subject":"s","body":"b"}`)
	wantStatus(t, resp, b, 202)
	resp, b = c.must("POST", "/refunds", refundBody)
	wantStatus(t, resp, b, 500)
	resp, b = c.must("POST", "/refunds", refundBody) // count=1 is spent
	wantStatus(t, resp, b, 201)
	if got := len(sb.Faults()); got != 2 {
		t.Errorf("%d faults left, want 2", got)
	}
}

func TestFirstMatchingFaultApplies(t *testing.T) {
	sb, c := start(t)
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeThrottle, Path: "/refunds", Count: 1})
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeUnavailable, Count: 2})
	for _, want := range []int{429, 503, 503, 201} {
		resp, b := c.must("POST", "/refunds", refundBody)
		wantStatus(t, resp, b, want)
	}
	wantCommitted(t, sb, "refunds", 1)
}

func TestFaultsApplyToLookups(t *testing.T) {
	sb, c := start(t)
	c.must("POST", "/tickets", `{"subject":"s"}`, "X-Idemgate-Operation", "op-1")
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeError, Path: "/tickets", Method: "GET", Count: 1})
	resp, b := c.must("GET", "/tickets?reference=op-1", "")
	wantStatus(t, resp, b, 500)
	resp, b = c.must("GET", "/tickets?reference=op-1", "")
	wantStatus(t, resp, b, 200)
}

func TestFaultsOverHTTP(t *testing.T) {
	sb, c := start(t)
	resp, b := c.must("PUT", "/_faults", `{"mode":"delay","path":"/refunds","count":3,"delay":"1.5s"}`)
	wantStatus(t, resp, b, 201)
	resp, b = c.must("POST", "/_faults", `[{"mode":"throttle","retry_after":2},{"mode":"hang","delay":0.25}]`)
	wantStatus(t, resp, b, 201)

	got := sb.Faults()
	want := []sandbox.Fault{
		{Mode: "delay", Path: "/refunds", Count: 3, Delay: 1500 * time.Millisecond},
		{Mode: "throttle", RetryAfter: 2},
		{Mode: "hang", Delay: 250 * time.Millisecond},
	}
	if len(got) != len(want) {
		t.Fatalf("faults %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("fault %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	// Control paths are never faulted, even by a fault on every path.
	resp, b = c.must("GET", "/_faults", "")
	wantStatus(t, resp, b, 200)
	var list struct {
		Faults []map[string]any `json:"faults"`
	}
	if err := json.Unmarshal(b, &list); err != nil || len(list.Faults) != 3 || list.Faults[0]["delay"] != "1.5s" {
		t.Errorf("list %s (%v)", b, err)
	}
	resp, b = c.must("POST", "/tickets", `{"subject":"s"}`)
	wantStatus(t, resp, b, 429)

	for _, bad := range []string{`{"mode":"explode"}`, `{"mode":"delay"}`, `{"mode":"error","count":-1}`,
		`{"mode":"delay","delay":"soon"}`, `not json`, `[{"mode":"error"},{"mode":"nope"}]`} {
		resp, b = c.must("PUT", "/_faults", bad)
		wantStatus(t, resp, b, 400)
	}
	if n := len(sb.Faults()); n != 3 {
		t.Errorf("invalid faults were queued: %d", n)
	}

	resp, b = c.must("DELETE", "/_faults", "")
	wantStatus(t, resp, b, 200)
	if obj(t, b)["cleared"] != 3.0 || len(sb.Faults()) != 0 {
		t.Errorf("delete %s", b)
	}
	resp, b = c.must("POST", "/tickets", `{"subject":"s"}`)
	wantStatus(t, resp, b, 201)
}

func TestAddFaultPanicsOnInvalid(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("AddFault accepted an unknown mode")
		}
	}()
	sandbox.New().AddFault(sandbox.Fault{Mode: "explode"})
}
