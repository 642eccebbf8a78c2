package sandbox

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoadKeepsWhatWasCommitted (issue 50 item 13): a sandbox loaded from the file another one
// kept counts what that one committed, answers a ticket's Idempotency-Key as it did, and goes
// on numbering after it.
func TestLoadKeepsWhatWasCommitted(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idemgate.db.sandbox.json")
	post := func(s *Sandbox, p, key, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, p, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		return w
	}
	first, err := Load(path)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, post(first, "/refunds", "", `{"order_id":"1042","amount_cents":1999,"currency":"EUR"}`).Code)
	ticket := post(first, "/tickets", "k-1", `{"subject":"Printer on fire"}`)
	require.Equal(t, http.StatusCreated, ticket.Code, ticket.Body.String())

	again, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, 1, again.Committed("refunds"))
	assert.Equal(t, 1, again.Committed("tickets"))
	replay := post(again, "/tickets", "k-1", `{"subject":"Printer on fire"}`)
	assert.Equal(t, ticket.Body.String(), replay.Body.String(), "the key's first answer, again")
	assert.Equal(t, 1, again.Committed("tickets"), "and nothing new")
	next := post(again, "/refunds", "", `{"order_id":"1043","amount_cents":500,"currency":"EUR"}`)
	assert.Contains(t, next.Body.String(), `"id":"R-5002"`, "numbering goes on")
}
