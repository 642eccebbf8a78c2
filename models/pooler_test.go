package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Through a URL in a transaction pooler's mode (default_query_exec_mode exec or
// simple_protocol), pgx does not learn a statement's parameter types from the server: what the
// ledger writes as JSON text (params, results) must still be stored as that text, not as the
// hex of a bytea, and read back the same through a URL in the default mode.
func TestSessionlessModesStoreParamsAndResultsAsWritten(t *testing.T) {
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			dsn := testdb.DSN(t, models.Postgres)
			require.True(t, models.TransactionPooled(dsn+"&default_query_exec_mode="+mode))
			db, d, err := models.Open(ctx, dsn+"&default_query_exec_mode="+mode)
			require.NoError(t, err)
			sqlDB, _ := db.DB()
			t.Cleanup(func() { sqlDB.Close() })
			require.NoError(t, models.Migrate(ctx, db, d), "migrations in %s mode", mode)
			l := models.New(models.Config{DB: db, Dialect: d, Key: testdb.Key(t, db)})
			c := agentOf(ctx, t, l)

			in := newOp(c, "k1")
			in.Params = []byte(`{"subject":"it's \"quoted\", a backslash \\ and ünïcode"}`)
			in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
			s, err := l.Submit(ctx, in)
			require.NoError(t, err)
			result := []byte(`{"id":"R-1","note":"O'Brien"}`)
			require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", models.AttemptOutcome{
				Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded, Result: result, DownstreamRef: "R-1"}))

			// Today the ledger turns its JSON into strings before it writes; a []byte handed to
			// the pool is sent as text too, not as a bytea's hex.
			var got string
			require.NoError(t, sqlDB.QueryRowContext(ctx, "SELECT $1::text", []byte(`{"a":1}`)).Scan(&got))
			assert.Equal(t, `{"a":1}`, got, "a []byte parameter in %s mode", mode)

			direct, dd, err := models.Open(ctx, dsn)
			require.NoError(t, err)
			directDB, _ := direct.DB()
			t.Cleanup(func() { directDB.Close() })
			for name, reader := range map[string]*models.Ledger{mode: l, "default mode": models.New(models.Config{DB: direct, Dialect: dd})} {
				op, err := reader.Get(ctx, "acme", s.Op.ID)
				require.NoError(t, err, name)
				assert.Equal(t, string(in.Params), deref(op.Params), "params read through the %s URL", name)
				assert.Equal(t, string(result), deref(op.Result), "result read through the %s URL", name)
			}
		})
	}
}

// The sessionless modes send every []byte as text (models/pgconn.go bytesAsText), which is
// right only while the ledger keeps no bytea column.
func TestSchemaHasNoByteaColumn(t *testing.T) {
	db := testdb.Open(t, models.Postgres)
	var cols []string
	require.NoError(t, db.Raw(`SELECT table_name || '.' || column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND data_type = 'bytea'`).Scan(&cols).Error)
	assert.Empty(t, cols, "a bytea column: the sessionless modes would send its values as text")
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
