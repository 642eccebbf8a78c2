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

// TestIndexStepBuiltConcurrently: on a ledger that is not new, an index step (the look-alikes
// index) is built CONCURRENTLY on PostgreSQL, outside the migration's transaction, so writers go
// on meanwhile. A build that
// was cut off leaves an invalid index of its name, which IF NOT EXISTS alone would take for
// done: the next migrate drops and rebuilds it. Two replicas migrating at once both succeed,
// and the step records that it serves the previous schema.
func TestIndexStepBuiltConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t, models.Postgres)
	require.NoError(t, db.Exec("DELETE FROM schema_migrations WHERE version >= 23").Error)
	require.NoError(t, db.Exec("DROP INDEX operations_lookalike").Error)
	// Back to schema 22: what steps 24 to 29 added goes too.
	require.NoError(t, db.Exec("ALTER TABLE webhook_subscriptions DROP COLUMN format, DROP COLUMN routing_key, DROP COLUMN routing_key_sealed, DROP COLUMN routing_key_hint").Error)
	require.NoError(t, db.Exec("DROP TABLE emails").Error)
	require.NoError(t, db.Exec("DROP TABLE user_invites").Error)
	require.NoError(t, db.Exec("DROP TRIGGER operations_budget_recount ON operations").Error)
	require.NoError(t, db.Exec("DROP TABLE operation_policies, budget_charges, budget_locks, budget_limits, budget_counters").Error)
	require.NoError(t, db.Exec("DROP FUNCTION operations_budget_recount(), budget_charges_count()").Error)
	require.NoError(t, db.Exec("ALTER TABLE users DROP COLUMN email_muted, DROP COLUMN email_digest").Error)
	// What a cut-off concurrent build leaves: an index of the name, marked invalid.
	require.Error(t, db.Exec("CREATE UNIQUE INDEX CONCURRENTLY operations_lookalike ON schema_migrations ((true))").Error)
	var valid bool
	require.NoError(t, db.Raw("SELECT indisvalid FROM pg_index WHERE indexrelid = 'operations_lookalike'::regclass").Scan(&valid).Error)
	require.False(t, valid)

	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- models.Migrate(ctx, db, models.Postgres) }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)

	var index struct {
		Valid bool
		Table string
		Def   string
	}
	require.NoError(t, db.Raw(`SELECT i.indisvalid AS valid, i.indrelid::regclass::text AS "table", pg_get_indexdef(i.indexrelid) AS def
		FROM pg_index i WHERE i.indexrelid = 'operations_lookalike'::regclass`).Scan(&index).Error)
	assert.True(t, index.Valid)
	assert.Equal(t, "operations", index.Table)
	assert.Contains(t, index.Def, "(tenant, fingerprint, created_at)")
	var servesFrom int
	require.NoError(t, db.Raw("SELECT serves_from FROM schema_migrations WHERE version = 23").Scan(&servesFrom).Error)
	assert.Equal(t, 22, servesFrom, "an index only adds: the previous release runs on it")
}
