package app_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDataKeyAtStart: a gateway whose catalogue has sensitive params warns at start when it
// has no data key, and says nothing when it has one, and then seals the ledger's key (which
// stays the same key); a gateway without a data key refuses a ledger that holds sealed params
// or a sealed ledger key, which it could not use.
func TestDataKeyAtStart(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		db := testdb.Open(t, d)
		cat := catalog.Demo("http://127.0.0.1:9/sandbox")
		start := func(keys *datakey.Keyring) (string, error) {
			var logs bytes.Buffer
			_, err := app.New(ctx, app.Config{DB: db, Dialect: d, Catalog: cat, DataKeys: keys,
				Log: slog.New(slog.NewTextHandler(&logs, nil))})
			return logs.String(), err
		}
		logs, err := start(nil)
		require.NoError(t, err)
		assert.Contains(t, logs, "IDEMGATE_DATA_KEY is not set")
		assert.Contains(t, logs, "refunds.issue")

		before := testdb.Key(t, db).DownstreamKey("acme", "k")
		var stored string
		require.NoError(t, db.Raw("SELECT value FROM settings WHERE name = 'ledger.key'").Scan(&stored).Error)
		keys, err := datakey.Parse(datakey.Generate(), "")
		require.NoError(t, err)
		logs, err = start(keys)
		require.NoError(t, err)
		assert.NotContains(t, logs, "IDEMGATE_DATA_KEY")
		var sealed string
		require.NoError(t, db.Raw("SELECT value FROM settings WHERE name = 'ledger.key'").Scan(&sealed).Error)
		assert.NotContains(t, sealed, stored, "the ledger's key is kept sealed from now on")
		key, err := models.LedgerKey(ctx, db, keys)
		require.NoError(t, err)
		assert.Equal(t, before, key.DownstreamKey("acme", "k"), "and it is the same key")
		_, err = start(nil)
		assert.ErrorContains(t, err, "IDEMGATE_DATA_KEY is not set", "a replica without the data key does not start")

		// Something sealed: a replica started without the key must not run.
		l := models.New(models.Config{DB: db, Dialect: d, Key: key, DataKeys: keys})
		_, err = l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
		require.NoError(t, err)
		params := []byte(`{"card_number":"4242424242424242"}`)
		_, err = l.Submit(ctx, models.NewOperation{Tenant: "acme", PrincipalID: "p", APIKeyID: "k", Key: "k1", Tool: "refunds.issue",
			Fingerprint: l.Fingerprint("refunds.issue", params), Params: params, Masked: []byte(`{"card_number":"***"}`), Actor: "api:agent"})
		require.NoError(t, err)
		assert.NoError(t, l.CheckDataKeys(ctx))
		noKeys := models.New(models.Config{DB: db, Dialect: d})
		assert.ErrorContains(t, noKeys.CheckDataKeys(ctx), "IDEMGATE_DATA_KEY is not set, but the ledger holds params sealed")
	})
}
