package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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

// handTimer is a sandbox timer the test works by hand: every delay or hang the sandbox begins is
// announced on began, with its duration, and lasts until the test fires it.
type handTimer struct{ began chan heldRequest }

type heldRequest struct {
	d    time.Duration
	fire chan time.Time
}

func (h handTimer) after(d time.Duration) <-chan time.Time {
	held := heldRequest{d: d, fire: make(chan time.Time, 1)}
	h.began <- held
	return held.fire
}

// timed is a sandbox on the hand timer, with a client that opens a connection per request and
// a feed of the paths whose handlers have returned.
type timed struct {
	sb     *sandbox.Sandbox
	c      client
	timer  handTimer
	served chan string
}

func startTimed(t *testing.T) timed {
	t.Helper()
	tm := timed{timer: handTimer{began: make(chan heldRequest)}, served: make(chan string, 16)}
	tm.sb = sandbox.New(sandbox.WithTimer(tm.timer.after))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { tm.served <- r.URL.Path }()
		tm.sb.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		tm.sb.ClearFaults() // frees what a failed test left held
		srv.Close()
	})
	tm.c = client{t: t, base: srv.URL, hc: fresh(0)}
	return tm
}

// send sends a request in the background; its error (nil when answered) arrives on the
// channel. Cancelling ctx is the caller giving up.
func (tm timed) send(ctx context.Context, path, body string) <-chan error {
	errc := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, tm.c.base+path, strings.NewReader(body))
		if err == nil {
			var resp *http.Response
			if resp, err = tm.c.hc.Do(req); err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
		}
		errc <- err
	}()
	return errc
}

// recv receives from ch. The bound only keeps a broken sandbox from hanging the suite; no
// assertion depends on how long anything took.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("still waiting for %s", what)
		panic("unreachable")
	}
}

// unanswered checks that a request got no answer because the sandbox closed the connection,
// not because the caller gave up.
func unanswered(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("the caller got an answer; want a closed connection")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the caller gave up (%v); want the sandbox to close the connection", err)
	}
}

// A hang without a delay holds the request until the caller gives up (bounded by maxHang),
// and commits nothing.
func TestHang(t *testing.T) {
	tm := startTimed(t)
	tm.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeHang, Path: "/refunds"})
	ctx, giveUp := context.WithCancel(t.Context())
	errc := tm.send(ctx, "/refunds", refundBody)
	if held := recv(t, tm.timer.began, "the request to be held"); held.d != 5*time.Minute {
		t.Errorf("held for %v, want maxHang", held.d)
	}
	giveUp()
	if err := recv(t, errc, "the caller's outcome"); err == nil {
		t.Fatal("the caller got an answer; want none")
	}
	if p := recv(t, tm.served, "the handler to return"); p != "/refunds" {
		t.Fatalf("served %s", p)
	}
	wantCommitted(t, tm.sb, "refunds", 0)
}

func TestHangAfterCommit(t *testing.T) {
	tm := startTimed(t)
	tm.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeHangAfterCommit, Path: "/refunds"})
	ctx, giveUp := context.WithCancel(t.Context())
	errc := tm.send(ctx, "/refunds", refundBody)
	recv(t, tm.timer.began, "the request to be held")
	wantCommitted(t, tm.sb, "refunds", 1) // committed, then held
	giveUp()
	if err := recv(t, errc, "the caller's outcome"); err == nil {
		t.Fatal("the caller got an answer; want none")
	}
	wantCommitted(t, tm.sb, "refunds", 1)
}

// A hang with a delay holds the request for that delay, then closes the connection unanswered.
func TestHangWithDelayClosesUnanswered(t *testing.T) {
	tm := startTimed(t)
	tm.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeHang, Delay: 100 * time.Millisecond})
	errc := tm.send(t.Context(), "/tickets", `{"subject":"s"}`)
	held := recv(t, tm.timer.began, "the request to be held")
	if held.d != 100*time.Millisecond {
		t.Errorf("held for %v, want the fault's delay", held.d)
	}
	held.fire <- time.Now()
	unanswered(t, recv(t, errc, "the caller's outcome"))
	wantCommitted(t, tm.sb, "tickets", 0)
}

func TestClearFaultsReleasesHang(t *testing.T) {
	tm := startTimed(t)
	tm.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeHang})
	errc := tm.send(t.Context(), "/tickets", `{"subject":"s"}`)
	recv(t, tm.timer.began, "the request to be held") // held, and its timer never fires
	tm.sb.ClearFaults()
	unanswered(t, recv(t, errc, "the caller's outcome"))
}

func TestDelay(t *testing.T) {
	tm := startTimed(t)
	tm.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Delay: 150 * time.Millisecond, Count: 1})
	errc := tm.send(t.Context(), "/tickets", `{"subject":"s"}`)
	held := recv(t, tm.timer.began, "the request to be held")
	if held.d != 150*time.Millisecond {
		t.Errorf("delayed for %v, want the fault's delay", held.d)
	}
	wantCommitted(t, tm.sb, "tickets", 0) // nothing happens during the delay
	held.fire <- time.Now()
	if err := recv(t, errc, "the caller's outcome"); err != nil {
		t.Fatalf("after the delay the request is served: %v", err)
	}
	recv(t, tm.served, "the handler to return")
	wantCommitted(t, tm.sb, "tickets", 1)

	// A caller that gives up during the delay is not served: nothing commits.
	tm.sb.AddFault(sandbox.Fault{Mode: sandbox.ModeDelay, Delay: 300 * time.Millisecond, Count: 1})
	ctx, giveUp := context.WithCancel(t.Context())
	errc = tm.send(ctx, "/tickets", `{"subject":"s"}`)
	recv(t, tm.timer.began, "the request to be held")
	giveUp()
	if err := recv(t, errc, "the caller's outcome"); err == nil {
		t.Fatal("want no answer for a caller that gave up")
	}
	recv(t, tm.served, "the handler to return") // the handler is done, and did not commit
	wantCommitted(t, tm.sb, "tickets", 1)
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

// PUT /_faults replaces what is queued, so running a command twice leaves the same faults;
// POST queues behind them. An invalid PUT clears nothing.
func TestPutFaultsReplaces(t *testing.T) {
	sb, c := start(t)
	put := `{"mode":"drop_after_commit","path":"/refunds","method":"POST","count":1}`
	for range 2 {
		resp, b := c.must("PUT", "/_faults", put)
		wantStatus(t, resp, b, 201)
	}
	want := []sandbox.Fault{{Mode: "drop_after_commit", Path: "/refunds", Method: "POST", Count: 1}}
	if got := sb.Faults(); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("after two PUTs: %+v, want %+v", got, want)
	}
	resp, b := c.must("POST", "/_faults", `{"mode":"error","path":"/tickets"}`)
	wantStatus(t, resp, b, 201)
	if n := len(sb.Faults()); n != 2 {
		t.Fatalf("POST queued behind: %d faults, want 2", n)
	}
	resp, b = c.must("PUT", "/_faults", `{"mode":"nope"}`)
	wantStatus(t, resp, b, 400)
	if n := len(sb.Faults()); n != 2 {
		t.Fatalf("an invalid PUT changed the queue: %d faults, want 2", n)
	}
	resp, b = c.must("PUT", "/_faults", `[]`)
	wantStatus(t, resp, b, 201)
	if n := len(sb.Faults()); n != 0 {
		t.Fatalf("PUT [] leaves %d faults, want none", n)
	}
}

// A fault with a method leaves the other methods alone: the look-up the gateway makes before
// each refund (GET) does not use up a fault meant for the refund itself (POST).
func TestFaultMethodSparesLookups(t *testing.T) {
	sb, c := start(t)
	c.must("PUT", "/_faults", `{"mode":"drop_after_commit","path":"/refunds","method":"POST","count":1}`)
	resp, b := c.must("GET", "/refunds?reference=dk_1", "")
	wantStatus(t, resp, b, 404)
	if _, _, err := c.with(fresh(5*time.Second)).do("POST", "/refunds", refundBody, "X-Idemgate-Downstream-Key", "dk_1"); err == nil {
		t.Fatal("the refund was answered; want its answer dropped")
	}
	wantCommitted(t, sb, "refunds", 1)
}

// Stamped ids never repeat across sandboxes started at different moments, and a stamped
// ticket is still found by its id.
func TestStampedIDs(t *testing.T) {
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	a, b := sandbox.New(sandbox.StampedIDs(at)), sandbox.New(sandbox.StampedIDs(at.Add(time.Second)))
	ids := map[string]bool{}
	for _, sb := range []*sandbox.Sandbox{a, b} {
		srv := httptest.NewServer(sb)
		t.Cleanup(srv.Close)
		for _, p := range []struct{ path, body string }{{"/refunds", refundBody}, {"/tickets", `{"subject":"s"}`}, {"/emails", `{"to":"a@b.c","subject":"s","body":"b"}`}} {
			resp, err := http.Post(srv.URL+p.path, "application/json", strings.NewReader(p.body))
			if err != nil {
				t.Fatal(err)
			}
			var got struct{ ID string }
			err = json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			if err != nil || got.ID == "" || ids[got.ID] {
				t.Fatalf("POST %s: id %q (%v); seen %v", p.path, got.ID, err, ids)
			}
			ids[got.ID] = true
			if p.path == "/tickets" {
				r, err := http.Get(srv.URL + "/tickets/" + got.ID)
				if err != nil {
					t.Fatal(err)
				}
				r.Body.Close()
				if r.StatusCode != 200 {
					t.Errorf("GET /tickets/%s: %d", got.ID, r.StatusCode)
				}
			}
		}
	}
	if !ids["R-"+strconv.FormatInt(at.UnixMilli(), 36)+"-5001"] {
		t.Errorf("ids %v: want R-<start in base 36>-5001", ids)
	}
}
