package sandbox_test

import (
	"sync"
	"testing"
)

func TestTicketCreateAndLookup(t *testing.T) {
	sb, c := start(t)
	resp, b := c.must("POST", "/tickets", `{"subject":"printer on fire","body":"help","priority":"high"}`,
		"X-Idemgate-Operation", "op-1")
	wantStatus(t, resp, b, 201)
	tk := obj(t, b)
	if tk["id"] != "T-1001" || tk["status"] != "open" || tk["subject"] != "printer on fire" ||
		tk["reference"] != "op-1" || tk["priority"] != "high" || tk["created_at"] == nil {
		t.Fatalf("ticket %s", b)
	}

	resp, b = c.must("GET", "/tickets?reference=op-1", "")
	wantStatus(t, resp, b, 200)
	if obj(t, b)["id"] != "T-1001" {
		t.Errorf("lookup %s", b)
	}
	resp, b = c.must("GET", "/tickets/T-1001", "")
	wantStatus(t, resp, b, 200)
	if obj(t, b)["subject"] != "printer on fire" {
		t.Errorf("get %s", b)
	}
	for _, p := range []string{"/tickets?reference=op-2", "/tickets?reference=", "/tickets/T-1002", "/tickets/T-01001", "/tickets/x"} {
		resp, b = c.must("GET", p, "")
		wantStatus(t, resp, b, 404)
		if obj(t, b)["error"] != "not found" {
			t.Errorf("GET %s: %s", p, b)
		}
	}

	resp, b = c.must("POST", "/tickets", `{"subject":"second"}`)
	wantStatus(t, resp, b, 201)
	if m := obj(t, b); m["id"] != "T-1002" || m["reference"] != "" || m["priority"] != "normal" {
		t.Errorf("second ticket %s", b)
	}
	resp, b = c.must("GET", "/tickets", "")
	wantStatus(t, resp, b, 200)
	if list, _ := obj(t, b)["tickets"].([]any); len(list) != 2 {
		t.Errorf("list %s", b)
	}
	wantCommitted(t, sb, "tickets", 2)
}

func TestTicketClose(t *testing.T) {
	sb, c := start(t)
	c.must("POST", "/tickets", `{"subject":"s"}`)
	for range 2 {
		resp, b := c.must("POST", "/tickets/T-1001/close", `{"reason":"done"}`)
		wantStatus(t, resp, b, 200)
		if m := obj(t, b); m["status"] != "closed" || m["close_reason"] != "done" || m["closed_at"] == nil {
			t.Errorf("close %s", b)
		}
	}
	wantCommitted(t, sb, "closes", 1)
	resp, b := c.must("POST", "/tickets/T-1001/close", "") // the body is optional
	wantStatus(t, resp, b, 200)
	resp, b = c.must("POST", "/tickets/T-4242/close", `{"reason":"x"}`)
	wantStatus(t, resp, b, 404)
	wantCommitted(t, sb, "closes", 1)
}

func TestTicketIdempotencyKey(t *testing.T) {
	sb, c := start(t)
	first, b1 := c.must("POST", "/tickets", `{"subject":"s","priority":"high"}`, "Idempotency-Key", "k1",
		"X-Idemgate-Operation", "op-1")
	wantStatus(t, first, b1, 201)

	// Same parameters in another key order and spacing: the same request.
	again, b2 := c.must("POST", "/tickets", `{ "priority":"high", "subject":"s" }`, "Idempotency-Key", "k1",
		"X-Idemgate-Operation", "op-1")
	wantStatus(t, again, b2, 201)
	if string(b1) != string(b2) {
		t.Errorf("replay differs:\n%s\n%s", b1, b2)
	}
	if again.Header.Get("Idempotent-Replayed") != "true" || first.Header.Get("Idempotent-Replayed") != "" {
		t.Error("Idempotent-Replayed header not set on the replay only")
	}
	wantCommitted(t, sb, "tickets", 1)

	resp, b := c.must("POST", "/tickets", `{"subject":"other"}`, "Idempotency-Key", "k1")
	wantStatus(t, resp, b, 422)
	wantCommitted(t, sb, "tickets", 1)

	// A request that failed validation stores nothing under its key.
	resp, b = c.must("POST", "/tickets", `{}`, "Idempotency-Key", "k2")
	wantStatus(t, resp, b, 400)
	resp, b = c.must("POST", "/tickets", `{"subject":"s"}`, "Idempotency-Key", "k2")
	wantStatus(t, resp, b, 201)

	// Without a key every request commits.
	c.must("POST", "/tickets", `{"subject":"s"}`)
	c.must("POST", "/tickets", `{"subject":"s"}`)
	wantCommitted(t, sb, "tickets", 4)
}

func TestTicketConcurrentDuplicates(t *testing.T) {
	sb, c := start(t)
	const n = 32
	bodies := make([]string, n)
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, b, err := c.do("POST", "/tickets", `{"subject":"burst"}`, "Idempotency-Key", "same")
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i], bodies[i] = resp.StatusCode, string(b)
		})
	}
	wg.Wait()
	for i := range n {
		if statuses[i] != 201 || bodies[i] != bodies[0] {
			t.Errorf("request %d: %d %s (first %s)", i, statuses[i], bodies[i], bodies[0])
		}
	}
	wantCommitted(t, sb, "tickets", 1)
	if got := len(sb.Requests("/tickets")); got != n {
		t.Errorf("recorded %d requests, want %d", got, n)
	}
}
