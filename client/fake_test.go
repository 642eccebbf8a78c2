package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeGateway answers requests with its steps, in turn (the last step repeats), and records
// every request it read. It stands in for a gateway whose answers go wrong in chosen ways.
type fakeGateway struct {
	URL string

	mu    sync.Mutex
	steps []step
	seen  []seen
}

// step answers one request.
type step func(w http.ResponseWriter, r *http.Request)

// seen is one request the fake read.
type seen struct {
	method, path, query string
	key, prefer, body   string
	step                int
}

func newFake(t *testing.T, steps ...step) *fakeGateway {
	t.Helper()
	f := &fakeGateway{steps: steps}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

func (f *fakeGateway) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	i := min(len(f.seen), len(f.steps)-1)
	f.seen = append(f.seen, seen{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, key: r.Header.Get("Idempotency-Key"),
		prefer: r.Header.Get("Prefer"), body: string(body), step: i})
	s := f.steps[i]
	f.mu.Unlock()
	s(w, r)
}

func (f *fakeGateway) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.seen...)
}

// drop reads the request and closes the connection without an answer.
func drop(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	_ = conn.Close()
}

// operation answers status with an operation in state.
func operation(status int, state string, header ...string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, opJSON(state))
	}
}

const opID = "op_01JD7X4T6V8Q0W9M3K5N2P1R8S"

func opJSON(state string) string {
	result, completed, errMember := "null", "null", "null"
	switch state {
	case "SUCCEEDED":
		result, completed = `{"id":"T-1042","status":"open"}`, `"2026-11-29T10:00:01Z"`
	case "FAILED_FINAL":
		completed, errMember = `"2026-11-29T10:00:01Z"`, `{"class":"rejected","message":"downstream answered 422","downstream_status":422}`
	}
	return `{"id":"` + opID + `","key":"wf-1:create-ticket","tool":"tickets.create","state":"` + state + `",` +
		`"fingerprint":"sha256:9f2c5a4e0d1b7c3a8e6f2d4b1a0c9e8d7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c",` +
		`"params":{"subject":"Printer on fire"},"result":` + result + `,"error":` + errMember + `,` +
		`"downstream_ref":null,"attempts":1,"next_attempt_at":null,"review":null,"compensates":null,` +
		`"compensated_by":null,"workflow_run_id":"wf-1","step_id":"create-ticket",` +
		`"created_at":"2026-11-29T10:00:00Z","updated_at":"2026-11-29T10:00:00Z","completed_at":` + completed + `}`
}

// problem answers a problem of slug with status; retryAfter > 0 adds Retry-After, and an
// operation problem names opID in state.
func problem(status int, slug string, retryAfter int, state string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		if retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		extra := ""
		if state != "" {
			extra = `,"operation_id":"` + opID + `","state":"` + state + `","safe_to_retry_with_new_key":false`
		}
		if slug == "invalid-params" {
			extra = `,"errors":[{"pointer":"/subject","message":"expected string, but got number"}]`
		}
		fmt.Fprintf(w, `{"type":"/problems/%s","title":"%s","status":%d,"detail":"%s happened"%s}`,
			slug, http.StatusText(status), status, slug, extra)
	}
}

// pauses records every wait the client asks for, with how many requests the fake had read by
// then, and skips it: what a test checks is what the client asked to wait, not the time that
// passed.
type pauses struct {
	f    *fakeGateway
	mu   sync.Mutex
	list []pause
}

type pause struct {
	d     time.Duration
	after int // requests the fake had read when the client paused
}

func (p *pauses) record(ctx context.Context, d time.Duration) error {
	n := len(p.f.requests())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, pause{d: d, after: n})
	return ctx.Err()
}

// before returns the waits the client asked for between request i-1 and request i.
func (p *pauses) before(i int) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []time.Duration
	for _, w := range p.list {
		if w.after == i {
			out = append(out, w.d)
		}
	}
	return out
}
