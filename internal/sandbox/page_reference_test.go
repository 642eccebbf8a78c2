package sandbox_test

import (
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/sandbox"
)

// Issue 51 item 4: the console's "Look it up" opens the page for people, which lists only what
// has the reference, and answers while a fault makes every refund look-up fail with 500.
func TestPageByReference(t *testing.T) {
	sb, c := start(t)
	c.must("POST", "/refunds", `{"order_id":"1044","amount_cents":4200,"currency":"EUR"}`, "X-Idemgate-Downstream-Key", "dk_1044")
	c.must("POST", "/refunds", `{"order_id":"1045","amount_cents":900,"currency":"EUR"}`, "X-Idemgate-Downstream-Key", "dk_1045")
	sb.AddFault(sandbox.Fault{Mode: sandbox.ModeError, Path: "/refunds", Method: "GET"})

	resp, b := c.must("GET", "/refunds?reference=dk_1044", "")
	wantStatus(t, resp, b, 500) // the API's look-up, under the fault

	resp, b = c.must("GET", "/?reference=dk_1044", "")
	wantStatus(t, resp, b, 200)
	page := string(b)
	for _, want := range []string{"Reference dk_1044:</strong> 1 found", "R-5001", "1044", "Show everything"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "dk_1045") {
		t.Error("page lists another reference's refund")
	}
	resp, b = c.must("GET", "/?reference=dk_none", "")
	wantStatus(t, resp, b, 200)
	if !strings.Contains(string(b), "0 found: nothing was created with this reference") {
		t.Errorf("page for an unknown reference: %s", b)
	}
}
