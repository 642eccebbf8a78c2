package models_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// backends takes n connections from the pool at once and returns their server process ids.
func backends(t *testing.T, db *sql.DB, n int) []int {
	t.Helper()
	ctx := context.Background()
	conns := make([]*sql.Conn, n)
	pids := make([]int, n)
	for i := range conns {
		c, err := db.Conn(ctx)
		require.NoError(t, err)
		conns[i] = c
		require.NoError(t, c.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pids[i]))
	}
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	return pids
}

// A server that answers "read-only transaction" (25006) is no primary any more, whatever
// the URL said: that connection closes, and every connection opened before it is replaced
// when next taken from the pool, since they all went to the same server. (One session set
// read-only stands in for a server fenced read-only; the failover tests in e2e/process do it
// to a whole server.)
func TestReadOnlyAnswerRetiresEveryConnectionOpenedBefore(t *testing.T) {
	ctx := context.Background()
	db := testdb.Open(t, models.Postgres)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(3)
	sqlDB.SetMaxIdleConns(3)
	before := backends(t, sqlDB, 3)

	c, err := sqlDB.Conn(ctx)
	require.NoError(t, err)
	_, err = c.ExecContext(ctx, "SET default_transaction_read_only = on")
	require.NoError(t, err)
	_, err = c.ExecContext(ctx, "INSERT INTO settings (name, value) VALUES ('x', 'y')")
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%v", err)
	require.Equal(t, "25006", pgErr.Code)
	require.NoError(t, c.Close())

	after := backends(t, sqlDB, 3)
	for _, pid := range after {
		assert.NotContains(t, before, pid, "a connection opened before the read-only answer was used again")
	}
	// The new ones are kept: nothing read-only was heard since they opened.
	assert.ElementsMatch(t, after, backends(t, sqlDB, 3))
}

// /readyz's check: a ledger whose server takes no writes is not ready, and the probe itself
// moves the pool off that server.
func TestReadyIsNotReadyOnAServerThatTakesNoWrites(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.DSN(t, models.Postgres)
	db, d, err := models.Open(ctx, dsn)
	require.NoError(t, err)
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	require.NoError(t, models.Migrate(ctx, db, d))
	l := models.New(models.Config{DB: db, Dialect: d})
	require.NoError(t, l.Ready(ctx))

	// One connection, read-only: as if the whole server were.
	sqlDB.SetMaxOpenConns(1)
	_, err = sqlDB.ExecContext(ctx, "SET default_transaction_read_only = on")
	require.NoError(t, err)
	err = l.Ready(ctx)
	assert.Equal(t, models.CodeUnavailable, models.ErrorCode(err), "not ready: %v", err)
	require.NoError(t, l.Ready(ctx), "the read-only connection was dropped; the next one is on a writable server")
}
