package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
)

// A NUL in a console search filter, a path id or a form is refused with 400 before the ledger
// sees it: PostgreSQL would fail the statement (503), SQLite would not; both answer alike.
func TestConsoleRefusesNUL(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newReviewDesk(t, d, consoletest.Options{})
		op := desk.awaiting(t, "payments.payout", "payout-nul")
		for _, path := range []string{"/operations?key=a%00b", "/operations?param=order_id%3Da%00", "/operations?workflow=w%00",
			"/operations/op_%00", "/workflows/wf%00", "/reviews?tool=x%00"} {
			assert.Equal(t, http.StatusBadRequest, desk.rita.Get(t, path).Status, path)
		}
		desk.rita.Get(t, "/operations/"+op.ID)
		p := act(t, desk.rita, op, models.ActionApprove, url.Values{"reason": {"checked\x00"}})
		assert.Equal(t, http.StatusBadRequest, p.Status)
		assert.Empty(t, reviewActions(desk.record(t, op)), "nothing was decided")
		assert.Equal(t, http.StatusOK, desk.rita.Get(t, "/operations?key=payout").Status, "the console still answers")
	})
}
