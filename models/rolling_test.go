package models_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLedgerOfANewerRelease: during a rolling upgrade the newer release migrates the ledger
// while replicas of this one still serve. While the newest step says it serves this build's
// schema, this build stays ready and starts (its migrate does nothing); once a step serves
// only newer schemas, it is not ready and refuses to start, naming the schema it needs. Both
// engines.
func TestLedgerOfANewerRelease(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		db := testdb.Open(t, d)
		l := models.New(models.Config{DB: db, Dialect: d, Key: testdb.Key(t, db)})
		require.NoError(t, l.Ready(ctx))

		next := models.SchemaVersion() + 1
		require.NoError(t, db.Exec("INSERT INTO schema_migrations (version, name, applied_at, serves_from) VALUES (?, ?, ?, ?)",
			next, "a step of the next release that only adds", time.Now().UTC(), models.SchemaVersion()).Error)
		assert.NoError(t, l.Ready(ctx), "an expanded ledger still serves this build")
		assert.NoError(t, models.Migrate(ctx, db, d), "and this build starts on it")

		require.NoError(t, db.Exec("INSERT INTO schema_migrations (version, name, applied_at, serves_from) VALUES (?, ?, ?, ?)",
			next+1, "a step that contracts", time.Now().UTC(), next).Error)
		err := l.Ready(ctx)
		require.Error(t, err)
		assert.Equal(t, models.CodeUnavailable, models.ErrorCode(err))
		err = models.Migrate(ctx, db, d)
		var tooNew *models.ErrLedgerTooNew
		require.True(t, errors.As(err, &tooNew), "%v", err)
		assert.Equal(t, models.ErrLedgerTooNew{Ledger: next + 1, ServesFrom: next, Build: models.SchemaVersion()}, *tooNew)
		assert.Contains(t, err.Error(), "run a release whose `idemgate version` says schema")
	})
}
