package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An admin creates a user without typing a password: the page shows an invite link once; the
// person opens it, is refused a short password and two that differ, sets one, and signs in with
// it; the link then works no more, and one past its 72 hours never did. The ledger keeps the
// token's hash only. Both engines.
func TestInviteLinks(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con := consoletest.Start(t, d, consoletest.Options{})
		con.Tenant(t, "acme")
		ada := con.NewBrowser(t)
		ada.MustLogin(t, "ada@example.com", con.User(t, "ada@example.com", models.RoleAdmin))
		ada.Get(t, "/admin")
		invite := func(email string) string {
			p := ada.Post(t, "/admin/users", url.Values{"email": {email}, "role": {"reviewer"}, "tenants": {"acme"}})
			require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
			page := ada.Get(t, "/admin")
			links := page.TestIDs("invite-link")
			require.Len(t, links, 1, page.Body)
			assert.Empty(t, ada.Get(t, "/admin").TestIDs("invite-link"), "shown once")
			u, err := url.Parse(links[0])
			require.NoError(t, err)
			return u.Path
		}
		path := invite("nina@example.com")
		var stored []models.Invite
		require.NoError(t, con.Ledger.DB().Find(&stored).Error)
		require.Len(t, stored, 1)
		assert.NotContains(t, path, stored[0].TokenHash, "the ledger keeps a hash, not the token")

		nina := con.NewBrowser(t)
		p := nina.Get(t, path)
		require.Equal(t, http.StatusOK, p.Status)
		assert.Equal(t, []string{"nina@example.com"}, p.TestIDs("invite-email"))
		p = nina.Post(t, path, url.Values{"password": {"short"}, "password_again": {"short"}})
		assert.Equal(t, http.StatusBadRequest, p.Status)
		assert.Contains(t, strings.Join(p.TestIDs("notice"), " "), "at least 12 characters")
		p = nina.Post(t, path, url.Values{"password": {"a long enough password"}, "password_again": {"another long password"}})
		assert.Equal(t, http.StatusBadRequest, p.Status)
		p = nina.Post(t, path, url.Values{"password": {"a long enough password"}, "password_again": {"a long enough password"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		assert.True(t, strings.HasPrefix(p.Header.Get("Location"), "/login?reason=invited"))
		nina.MustLogin(t, "nina@example.com", "a long enough password")

		again := con.NewBrowser(t)
		assert.Equal(t, http.StatusNotFound, again.Get(t, path).Status, "a link works once")
		require.Equal(t, http.StatusOK, nina.Get(t, "/").Status) // a page with a form token
		assert.Equal(t, http.StatusNotFound, nina.Post(t, path, url.Values{"password": {"someone else's password"},
			"password_again": {"someone else's password"}}).Status, "nor can it set the password again")
		nina2 := con.NewBrowser(t)
		nina2.MustLogin(t, "nina@example.com", "a long enough password") // unchanged by the second try

		late := invite("late@example.com")
		con.Clock.Advance(73 * time.Hour)
		assert.Equal(t, http.StatusNotFound, con.NewBrowser(t).Get(t, late).Status, "past 72 hours the link does not work")
		audit, _, err := con.Ledger.AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Action: "user.invite_accept", Limit: 10})
		require.NoError(t, err)
		assert.Len(t, audit, 1)
	})
}
