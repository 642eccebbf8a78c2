package e2e_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServiceEndpoints: the probes answer, and every problem type has its page.
func TestServiceEndpoints(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)

		for _, path := range []string{"/healthz", "/readyz"} {
			r := g.Do(t, http.MethodGet, path, "", nil, "")
			assert.Equal(t, http.StatusOK, r.Status, "GET %s: %s", path, r.Body)
		}

		// Every problem type the API can answer with, which includes every one this suite
		// met (requireProblem also fetches each page it meets).
		for _, pt := range problems.All() {
			t.Run(pt.Slug, func(t *testing.T) {
				assert.True(t, strings.HasPrefix(pt.URI(), "/problems/"))
				r := g.Do(t, http.MethodGet, pt.URI(), "", map[string]string{"Accept": "text/html"}, "")
				require.Equal(t, http.StatusOK, r.Status, "GET %s", pt.URI())
				assert.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "text/html"), "Content-Type %q", r.Header.Get("Content-Type"))
				page := string(r.Body)
				assert.Contains(t, strings.ToLower(page), "<html")
				assert.Contains(t, page, htmlEscape(pt.Title))
				// A program that follows the type without asking for HTML gets the page too.
				plain := g.Do(t, http.MethodGet, pt.URI(), "", nil, "")
				assert.Equal(t, http.StatusOK, plain.Status)
			})
		}
		r := g.Do(t, http.MethodGet, "/problems/no-such-problem", "", nil, "")
		assert.Equal(t, http.StatusNotFound, r.Status)
	})
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

// TestRememberedKeyStillFailsClosed: the gateway remembers a key that just authenticated,
// so a request during a database outage gets past authentication; it must still fail closed
// at the ledger, and nothing may reach the downstream.
func TestRememberedKeyStillFailsClosed(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		first := g.Submit(t, "warm-1", "tickets.create", ticketParams, nil)
		require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
		id := requireOp(t, first, http.StatusCreated)["id"].(string)

		sqlDB, err := g.Ledger.DB().DB()
		require.NoError(t, err)
		require.NoError(t, sqlDB.Close())

		for _, r := range []gatewaytest.Response{
			g.Submit(t, "warm-2", "tickets.create", ticketParams, nil),    // new key
			g.Submit(t, "warm-1", "tickets.create", ticketParams, nil),    // replay
			g.Do(t, http.MethodGet, "/v1/operations/"+id, g.Key, nil, ""), // read
			g.Do(t, http.MethodPost, "/v1/operations/"+id+"/compensate", g.Key, nil, ""),
		} {
			requireProblem(t, g, r, http.StatusServiceUnavailable, "ledger-unavailable")
			assert.NotEmpty(t, r.Header.Get("Retry-After"))
		}
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"), "the outage let nothing through to the downstream")
	})
}
