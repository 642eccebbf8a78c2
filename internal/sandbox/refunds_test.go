package sandbox_test

import (
	"strings"
	"testing"
)

func TestRefundCreateAndLookup(t *testing.T) {
	sb, c := start(t)
	body := `{"order_id":"o-7","amount_cents":1999,"currency":"EUR","card_number":"4242 4242 4242 4242"}`
	resp, b := c.must("POST", "/refunds", body, "X-Idemgate-Operation", "op-r", "Idempotency-Key", "k")
	wantStatus(t, resp, b, 201)
	r := obj(t, b)
	if r["id"] != "R-5001" || r["status"] != "issued" || r["order_id"] != "o-7" || r["amount_cents"] != 1999.0 ||
		r["currency"] != "EUR" || r["reference"] != "op-r" || r["card_last4"] != "4242" {
		t.Fatalf("refund %s", b)
	}
	if strings.Contains(string(b), "4242 4242") || strings.Contains(string(b), "42424242") {
		t.Errorf("card number echoed: %s", b)
	}

	// Refunds ignore idempotency keys: the same key pays out again.
	resp, b = c.must("POST", "/refunds", body, "X-Idemgate-Operation", "op-r", "Idempotency-Key", "k")
	wantStatus(t, resp, b, 201)
	if obj(t, b)["id"] != "R-5002" {
		t.Errorf("second refund %s", b)
	}
	wantCommitted(t, sb, "refunds", 2)

	resp, b = c.must("GET", "/refunds?reference=op-r", "")
	wantStatus(t, resp, b, 200)
	if obj(t, b)["id"] != "R-5001" {
		t.Errorf("lookup returns %s, want the first refund", b)
	}
	resp, b = c.must("GET", "/refunds/R-5002", "")
	wantStatus(t, resp, b, 200)
	resp, b = c.must("GET", "/refunds?reference=op-none", "")
	wantStatus(t, resp, b, 404)
	if obj(t, b)["error"] != "not found" {
		t.Errorf("404 body %s", b)
	}
	resp, b = c.must("GET", "/refunds", "")
	wantStatus(t, resp, b, 200)
	if strings.Contains(string(b), "4242 4242") {
		t.Errorf("card number in list: %s", b)
	}

	// A short value is dropped rather than shown, since its last four digits are all of it.
	resp, b = c.must("POST", "/refunds", `{"order_id":"o","amount_cents":1,"currency":"EUR","card_number":"1234"}`)
	wantStatus(t, resp, b, 201)
	if strings.Contains(string(b), "1234") {
		t.Errorf("short card number echoed: %s", b)
	}
}

// TestRefundReferencedByDownstreamKey: a refund records the downstream key it is given, and a
// look-up by that key finds it, as one by the operation id does; a gateway that lost the
// operation's record looks it up by the key it sends again (docs/STATES.md).
func TestRefundReferencedByDownstreamKey(t *testing.T) {
	sb, c := start(t)
	body := `{"order_id":"o-8","amount_cents":5,"currency":"EUR"}`
	resp, b := c.must("POST", "/refunds", body, "X-Idemgate-Operation", "op-1", "X-Idemgate-Downstream-Key", "dk_1")
	wantStatus(t, resp, b, 201)
	if r := obj(t, b); r["reference"] != "dk_1" || r["operation"] != "op-1" {
		t.Fatalf("refund %s", b)
	}
	for _, ref := range []string{"dk_1", "op-1"} {
		resp, b = c.must("GET", "/refunds?reference="+ref, "")
		wantStatus(t, resp, b, 200)
		if obj(t, b)["id"] != "R-5001" {
			t.Errorf("look-up by %s: %s", ref, b)
		}
	}
	resp, b = c.must("GET", "/refunds?reference=dk_2", "")
	wantStatus(t, resp, b, 404)
	if got := sb.Requests("/refunds")[0].Header.Get("X-Idemgate-Downstream-Key"); got != "dk_1" {
		t.Errorf("recorded downstream key header %q", got)
	}
}
