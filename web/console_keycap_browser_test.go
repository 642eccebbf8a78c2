package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
)

// Issue 51 item 6: the key that opens "ask the downstream now" reads as the letter, as a key
// cap prints it ("L"), not as a lower-case l that a small monospace face draws like the digit 1.
func TestBrowserDecisionKeysReadAsKeyCaps(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	con := consoletest.Start(t, models.Postgres, consoletest.Options{})
	refund := escalatedRefund(t, con, "acme", "order-1044:refund", 1)
	pw := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	signIn(t, ctx, con.URL+"/operations/"+refund.ID, "rita@example.com", pw)
	run(t, ctx, chromedp.WaitVisible(testID("action-key-"+models.ActionReconcileNow)))
	keys := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('.action__key'), (k) => k.innerText)`))
	assert.Equal(t, []string{"L", "S", "N", "F"}, keys)
}
