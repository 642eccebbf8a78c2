package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 51 items 4 and 6, the texts that misled: a refund's risky retry names what would
// happen twice (not "a second email"); look-ups that all failed say they told nothing either
// way; the copy button says what it copies; a payout rejected before it was ever sent offers
// nothing to search the downstream for, and says a reviewer rejected it. Both engines.
func TestTextsThatMislead(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		refund := escalatedRefund(t, desk.con, "acme", "order-1044:refund", 3)
		p := desk.rita.Get(t, "/operations/"+refund.ID)
		require.Equal(t, http.StatusOK, p.Status)
		assert.NotContains(t, p.Body, "second email")
		assert.Contains(t, p.Body, "carries it out a second time (42.00 EUR to order 1044, twice)")
		assert.Equal(t, []string{"Copy the downstream key"}, p.Attrs("copy-reference", "aria-label"))
		reconcile := strings.Join(p.TestIDs("situation-reconcile"), "")
		assert.True(t, strings.HasPrefix(reconcile, "3 look-ups, all HTTP 500, which told nothing either way; next in "), reconcile)

		payout := desk.awaiting(t, "payouts.dual", "order-7702:payout")
		require.Equal(t, http.StatusSeeOther, act(t, desk.rita, payout, models.ActionReject, url.Values{"reason": {"No invoice 7702."}}).Status)
		p = desk.rita.Get(t, "/operations/"+payout.ID)
		require.Equal(t, http.StatusOK, p.Status)
		assert.Equal(t, []string{"Rejected by a reviewer: it was never sent, and never will be."}, p.TestIDs("situation-outcome"))
		assert.Empty(t, p.TestIDs("situation-reference"), "never sent: nothing to search the downstream for")
		assert.NotContains(t, p.Body, "Search the downstream")
	})
}
