package process_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// compensableTickets is a ticket tool with a compensation, for the replay cache's tests.
const compensableTickets = `  - name: tickets.open
    description: Open a support ticket, closed again by its compensation
    effect: write
    params_schema:
      type: object
      required: [subject]
      properties:
        subject: {type: string}
    http:
      url: "$SANDBOX/tickets"
      timeout: 1s
      idempotency_header: Idempotency-Key
      result_reference: /id
    compensation:
      tool: tickets.shut
      params: {ticket_id: "{{.Result.id}}"}
  - name: tickets.shut
    description: Close a ticket
    effect: idempotent
    params_schema:
      type: object
      required: [ticket_id]
      properties:
        ticket_id: {type: string}
    http:
      url: "$SANDBOX/tickets/{{.Params.ticket_id}}/close"
      timeout: 1s
`

// TestReplayCacheOnTwoReplicas: replays answered by replica B, which keeps terminal answers in
// memory, change as soon as what changes them is done on replica A: a compensation linked to
// the operation, and the agent's key revoked. Nothing is sent downstream twice.
func TestReplayCacheOnTwoReplicas(t *testing.T) {
	s := newStack(t, stackOptions{Extra: compensableTickets})
	a, b := s.serve(t, "A"), s.serve(t, "B")
	params := `{"subject":"Parcel lost"}`

	first := s.mustPost(t, a.URL, "ticket-1", "tickets.open", params, nil)
	require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
	id := first.id()
	for range 3 { // the first replay reads the ledger, the others may be answered from memory
		r := s.mustPost(t, b.URL, "ticket-1", "tickets.open", params, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
		assert.Nil(t, r.obj(t)["compensated_by"])
	}
	mismatch := s.mustPost(t, b.URL, "ticket-1", "tickets.open", `{"subject":"Other"}`, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, mismatch.Status, "a cached answer still compares params: %s", mismatch.Body)

	comp, err := s.do(http.MethodPost, a.URL+"/v1/operations/"+id+"/compensate", map[string]string{"Prefer": "wait=5"}, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, comp.Status, "%s", comp.Body)
	compID := comp.id()
	eventually(t, 10*time.Second, "B's replay names the compensation", func() (bool, string) {
		r := s.mustPost(t, b.URL, "ticket-1", "tickets.open", params, nil)
		return r.Status == http.StatusOK && r.obj(t)["compensated_by"] == compID, string(r.Body)
	})

	out := s.env.Run(t, "apikey", "revoke", s.key[:12])
	t.Logf("revoke: %s", out)
	eventually(t, 10*time.Second, "B refuses the revoked key's replay", func() (bool, string) {
		r := s.mustPost(t, b.URL, "ticket-1", "tickets.open", params, nil)
		return r.Status == http.StatusUnauthorized, string(r.Body)
	})
	var opened, closed int
	for _, r := range s.sb.Requests("/tickets") {
		switch {
		case r.Method == http.MethodPost && r.Path == "/tickets":
			opened++
		case strings.HasSuffix(r.Path, "/close"):
			closed++
		}
	}
	assert.Equal(t, 1, opened, "one ticket opened")
	assert.Equal(t, 1, closed, "and closed once")
}
