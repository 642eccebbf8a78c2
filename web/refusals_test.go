package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// refusalDesk is a console behind a trusted proxy on loopback, so that a test can speak as
// many client addresses (X-Forwarded-For), with small refusal budgets.
func refusalDesk(t *testing.T, d models.Dialect, limits handlers.RefusalLimits) *consoletest.Console {
	t.Helper()
	return consoletest.Start(t, d, consoletest.Options{TrustedProxies: proxies(t, "127.0.0.0/8"), RefusalLimits: limits})
}

// from is a browser whose requests come from addr, as the trusted proxy reports.
func from(t *testing.T, con *consoletest.Console, addr string) *consoletest.Browser {
	t.Helper()
	b := con.NewBrowser(t)
	b.Header.Set("X-Forwarded-For", addr)
	return b
}

// refusals lists the audit entries of action.
func refusals(t *testing.T, con *consoletest.Console, action string) []models.AuditEntry {
	t.Helper()
	es, _, err := con.Ledger.AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Action: action, Limit: 500})
	require.NoError(t, err)
	return es
}

// dropped waits until the summary entries of dropped refusals count total, and returns what
// they count by action and by address. A flood slower than SummaryAfter (sign-ins hash a
// password each) is summed up in several entries, one per period.
func dropped(t *testing.T, con *consoletest.Console, total int) (byAction, byAddress map[string]int) {
	t.Helper()
	gatewaytest.Eventually(t, 10*time.Second, "the summaries of dropped refusals", func() bool {
		byAction, byAddress = map[string]int{}, map[string]int{}
		n := 0
		for _, e := range refusals(t, con, models.AuditRefusalsDropped) {
			require.Equal(t, models.ActorGateway, e.Actor)
			var d struct {
				Total     int            `json:"total"`
				ByAction  map[string]int `json:"by_action"`
				ByAddress map[string]int `json:"by_address"`
			}
			require.NoError(t, json.Unmarshal([]byte(e.Detail), &d))
			n += d.Total
			for k, v := range d.ByAction {
				byAction[k] += v
			}
			for k, v := range d.ByAddress {
				byAddress[k] += v
			}
		}
		return n >= total
	})
	return byAction, byAddress
}

// byActor counts entries by actor.
func byActor(es ...[]models.AuditEntry) map[string]int {
	out := map[string]int{}
	for _, list := range es {
		for _, e := range list {
			out[e.Actor]++
		}
	}
	return out
}

// Console refusals anyone can cause (no CSRF token, wrong passwords) are recorded within a
// budget per address: one flooding address gets a few entries and one summary of the rest,
// and another address is still recorded in full.
func TestConsoleRefusalsAreBudgetedPerAddress(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con := refusalDesk(t, d, handlers.RefusalLimits{PerAddress: rate.Every(time.Hour), PerAddressBurst: 3,
			Global: rate.Inf, SummaryAfter: 100 * time.Millisecond})
		flood := from(t, con, "198.51.100.7")
		flood.Get(t, "/login")
		for range 6 {
			require.Equal(t, http.StatusForbidden, flood.Post(t, "/login", url.Values{"email": {"x@example.com"}, "csrf_token": {""}}).Status)
		}
		for range 4 {
			require.Equal(t, http.StatusUnauthorized, flood.Login(t, "x@example.com", "not the password at all").Status)
		}
		calm := from(t, con, "203.0.113.20")
		calm.Get(t, "/login")
		require.Equal(t, http.StatusForbidden, calm.Post(t, "/login", url.Values{"csrf_token": {""}}).Status)
		require.Equal(t, http.StatusUnauthorized, calm.Login(t, "y@example.com", "not the password at all").Status)

		assert.Equal(t, map[string]int{"anonymous:198.51.100.7": 3, "anonymous:203.0.113.20": 2},
			byActor(refusals(t, con, models.AuditCSRFRefused), refusals(t, con, models.AuditLoginFailed)))
		byAction, byAddress := dropped(t, con, 7)
		assert.Equal(t, map[string]int{models.AuditCSRFRefused: 3, models.AuditLoginFailed: 4}, byAction)
		assert.Equal(t, map[string]int{"198.51.100.7": 7}, byAddress)
		_, _, err := con.Ledger.VerifyAudit(t.Context())
		require.NoError(t, err)
	})
}

// Many addresses together cannot flood the chain either: the global budget bounds them, and
// the summary counts what it dropped.
func TestRefusalsAreBudgetedInAll(t *testing.T) {
	t.Parallel()
	con := refusalDesk(t, models.SQLite, handlers.RefusalLimits{PerAddress: rate.Inf, Global: rate.Every(time.Hour), GlobalBurst: 4,
		SummaryAfter: 100 * time.Millisecond})
	for i := range 10 {
		b := from(t, con, fmt.Sprintf("198.51.100.%d", i+1))
		require.Equal(t, http.StatusUnauthorized, b.Login(t, "x@example.com", "not the password at all").Status)
	}
	assert.Len(t, refusals(t, con, models.AuditLoginFailed), 4)
	byAction, byAddress := dropped(t, con, 6)
	assert.Equal(t, map[string]int{models.AuditLoginFailed: 6}, byAction)
	assert.Len(t, byAddress, 6)
}

// The API's anonymous refusals (bad API keys) share the budget: one client sending bad keys
// cannot use it up for everyone, so another client's bad key is still recorded.
func TestAnonymousAPIRefusalsAreBudgetedPerAddress(t *testing.T) {
	t.Parallel()
	con := refusalDesk(t, models.SQLite, handlers.RefusalLimits{PerAddress: rate.Every(time.Hour), PerAddressBurst: 2,
		Global: 20, GlobalBurst: 40, SummaryAfter: 100 * time.Millisecond})
	badKey := func(addr string) {
		req, err := http.NewRequest(http.MethodGet, con.URL+"/v1/tools", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer idg_nope")
		req.Header.Set("X-Forwarded-For", addr)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	for range 60 { // more than the old global burst of 40
		badKey("198.51.100.66")
	}
	badKey("203.0.113.5")
	assert.Equal(t, map[string]int{"anonymous:198.51.100.66": 2, "anonymous:203.0.113.5": 1}, byActor(refusals(t, con, "api.unauthenticated")))
	byAction, byAddress := dropped(t, con, 58)
	assert.Equal(t, map[string]int{"api.unauthenticated": 58}, byAction)
	assert.Equal(t, map[string]int{"198.51.100.66": 58}, byAddress)
}
