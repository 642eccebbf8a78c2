package handlers

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// A flood within one summary period is summed up in one entry, whatever its size; the budget
// counts an IPv6 client by its /64, so that a client cannot spread over its own addresses.
func TestRefusalBudgetSummarisesAFloodOnce(t *testing.T) {
	t.Parallel()
	l := testdb.Ledger(t, models.SQLite)
	b := NewRefusalBudget(l, slog.New(slog.NewTextHandler(io.Discard, nil)),
		RefusalLimits{PerAddress: rate.Every(time.Hour), PerAddressBurst: 2, Global: rate.Inf, SummaryAfter: time.Hour})
	allowed := 0
	for i := range 1000 {
		if b.allow(fmt.Sprintf("2001:db8::%x", i), models.AuditCSRFRefused) {
			allowed++
		}
	}
	for range 10 {
		if b.allow("198.51.100.1", models.AuditLoginFailed) {
			allowed++
		}
	}
	assert.Equal(t, 4, allowed, "two for the /64, two for the IPv4 address")
	b.flush()
	b.flush() // nothing more was dropped: no second entry

	es, _, err := l.AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Action: models.AuditRefusalsDropped, Limit: 10})
	require.NoError(t, err)
	require.Len(t, es, 1)
	var d struct {
		Total     int            `json:"total"`
		Addresses int            `json:"addresses"`
		ByAction  map[string]int `json:"by_action"`
		ByAddress map[string]int `json:"by_address"`
	}
	require.NoError(t, json.Unmarshal([]byte(es[0].Detail), &d))
	assert.Equal(t, 1006, d.Total)
	assert.Equal(t, 2, d.Addresses)
	assert.Equal(t, map[string]int{models.AuditCSRFRefused: 998, models.AuditLoginFailed: 8}, d.ByAction)
	assert.Equal(t, map[string]int{"2001:db8::/64": 998, "198.51.100.1": 8}, d.ByAddress)
}
