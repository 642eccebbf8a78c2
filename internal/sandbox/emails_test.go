package sandbox_test

import "testing"

func TestEmails(t *testing.T) {
	sb, c := start(t)
	for _, want := range []string{"E-1", "E-2"} {
		resp, b := c.must("POST", "/emails", `{"to":"a@example.com","subject":"hi","body":"hello"}`)
		wantStatus(t, resp, b, 202)
		if m := obj(t, b); m["id"] != want || m["status"] != "queued" || len(m) != 2 {
			t.Errorf("email %s", b)
		}
	}
	wantCommitted(t, sb, "emails", 2)
	resp, b := c.must("GET", "/emails", "")
	wantStatus(t, resp, b, 405) // no lookup, on purpose
}
