package e2e_test

import (
	"net/http"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// conformConnectionNotConfigured meets 422 connection-not-configured: a tool whose connection
// needs a tenant secret the caller's tenant has not set (docs/TOOLS.md).
func conformConnectionNotConfigured(t *testing.T, c *conformance, d models.Dialect) {
	keys, err := datakey.Parse(datakey.Generate(), "")
	require.NoError(t, err)
	g := startWithTools(t, d, tenantTools, "http://127.0.0.1:9", gatewaytest.Options{DataKeys: keys})
	r := c.send(t, g, submitReq(g.Key, "pay-unconfigured", toolBody("payments.create", `{"amount":5}`), ""))
	assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
}
