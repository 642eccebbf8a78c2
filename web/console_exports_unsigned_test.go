package web_test

import (
	"net/http"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 51 item 6: the Exports page says, before anyone downloads one, that this gateway's
// exports are unsigned while it has no audit signing key, and stops saying so once it has one.
// Both engines.
func TestExportsPageSaysUnsigned(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		kr, err := datakey.Parse(datakey.Generate(), "")
		require.NoError(t, err)
		con := consoletest.Start(t, d, consoletest.Options{DataKeys: kr})
		con.Tenant(t, "acme")
		pw := con.User(t, "aude@example.com", models.RoleAuditor, "acme")
		b := con.NewBrowser(t)
		b.MustLogin(t, "aude@example.com", pw)

		p := b.Get(t, "/exports")
		require.Equal(t, http.StatusOK, p.Status)
		require.Len(t, p.TestIDs("exports-unsigned"), 1)
		assert.Contains(t, p.TestIDs("exports-unsigned")[0], "This gateway's exports are unsigned.")

		_, err = con.Ledger.GenerateAuditKey(t.Context(), models.Requester{Actor: models.ActorCLI})
		require.NoError(t, err)
		p = b.Get(t, "/exports")
		require.Equal(t, http.StatusOK, p.Status)
		assert.Empty(t, p.TestIDs("exports-unsigned"), "signed from now on")
	})
}
