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

// generous bounds a wait that a deadline must end long before: a loaded machine cannot fail
// the test, and a call that nothing ends (the bug) fails it.
const generous = 30 * time.Second

// within runs fn and fails the test when it has not returned within generous.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-time.After(generous):
		t.Fatalf("%s: still waiting after %s: nothing ended it", what, generous)
	}
}

// A request's ledger calls end at the request deadline when PostgreSQL stops answering (a
// partition: the connections stay open, no byte comes back), with CodeUnavailable, the 503
// ledger-unavailable of the API; /readyz's probe ends within its bound and answers at once
// while the ledger is known down; once the network heals, the same ledger serves again.
func TestRequestLedgerCallsEndAtTheDeadlineWhenPostgresIsSilent(t *testing.T) {
	dsn := testdb.DSN(t, models.Postgres)
	direct, _, err := models.Open(context.Background(), dsn)
	require.NoError(t, err)
	require.NoError(t, models.Migrate(context.Background(), direct, models.Postgres))
	sqlDirect, _ := direct.DB()
	sqlDirect.Close()

	hole, via := testdb.NewBlackhole(t, dsn)
	db, _, err := models.Open(context.Background(), via)
	require.NoError(t, err)
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	l := models.New(models.Config{DB: db, Dialect: models.Postgres, Key: testdb.Key(t, db), RequestDeadline: 500 * time.Millisecond})
	c := agentOf(context.Background(), t, l)
	s, err := l.Submit(context.Background(), newOp(c, "before"))
	require.NoError(t, err)
	require.NoError(t, l.Ready(context.Background()))

	hole.Silence()
	req := models.MarkRequest(context.Background())
	within(t, "a read", func() {
		_, err := l.Get(req, c.Tenant, s.Op.ID)
		assert.Equal(t, models.CodeUnavailable, models.ErrorCode(err), "%v", err)
	})
	within(t, "a write", func() {
		_, err := l.Submit(req, newOp(c, "during"))
		assert.Equal(t, models.CodeUnavailable, models.ErrorCode(err), "%v", err)
	})
	within(t, "the readiness probe", func() {
		assert.Error(t, l.Ready(context.Background()))
	})
	within(t, "the readiness probe while the ledger is known down", func() {
		assert.Error(t, l.Ready(context.Background()))
	})

	hole.Heal()
	deadline := time.Now().Add(generous)
	for l.Ready(context.Background()) != nil {
		require.True(t, time.Now().Before(deadline), "the ledger never became ready again")
		time.Sleep(50 * time.Millisecond)
	}
	_, err = l.Submit(models.MarkRequest(context.Background()), newOp(c, "after"))
	require.NoError(t, err)
}

// The wait for a pooled connection is bounded too: while every connection of the pool is
// held (here one, the pool cut to one), a request's read ends at the deadline instead of
// queueing behind them. A call that is no request's (a background job's) waits.
func TestRequestWaitForAPooledConnectionIsBounded(t *testing.T) {
	db := testdb.Open(t, models.Postgres)
	l := models.New(models.Config{DB: db, Dialect: models.Postgres, Key: testdb.Key(t, db), RequestDeadline: 300 * time.Millisecond})
	c := agentOf(context.Background(), t, l)
	s, err := l.Submit(context.Background(), newOp(c, "held"))
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(1)
	held, err := sqlDB.Conn(context.Background())
	require.NoError(t, err)
	release := func() { _ = held.Close() }
	defer release()

	within(t, "a request's read", func() {
		_, err := l.Get(models.MarkRequest(context.Background()), c.Tenant, s.Op.ID)
		assert.Equal(t, models.CodeUnavailable, models.ErrorCode(err), "%v", err)
	})
	done := make(chan error, 1)
	go func() {
		_, err := l.Get(context.Background(), c.Tenant, s.Op.ID)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a call that is no request's ended while the pool was held: %v", err)
	case <-time.After(time.Second):
	}
	release()
	within(t, "the background read once the connection is free", func() { require.NoError(t, <-done) })
}

// On SQLite the deadline does not apply: the ledger is a file on this host, which cannot go
// out of reach, and a request waiting for its one writer waits for other requests (a storm of
// duplicates, TestDuplicateStorm), which must not be answered 503.
func TestSQLiteRequestsWaitForTheWriter(t *testing.T) {
	db := testdb.Open(t, models.SQLite)
	l := models.New(models.Config{DB: db, Dialect: models.SQLite, Key: testdb.Key(t, db), RequestDeadline: 100 * time.Millisecond})
	c := agentOf(context.Background(), t, l)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	held, err := sqlDB.Conn(context.Background())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := l.Submit(models.MarkRequest(context.Background()), newOp(c, "queued"))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the request's write ended while the writer was held: %v", err)
	case <-time.After(time.Second):
	}
	require.NoError(t, held.Close())
	within(t, "the request's write once the writer is free", func() { require.NoError(t, <-done) })
}

// Every session to PostgreSQL carries the ledger's own deadlines and keepalives, unless the
// URL sets them; a URL for a transaction pooler gets none (PgBouncer refuses them).
func TestPostgresSessionParams(t *testing.T) {
	dsn := testdb.DSN(t, models.Postgres)
	show := func(dsn, name string) string {
		t.Helper()
		db, _, err := models.Open(context.Background(), dsn)
		require.NoError(t, err)
		sqlDB, _ := db.DB()
		defer sqlDB.Close()
		var v string
		require.NoError(t, db.Raw("SHOW "+name).Scan(&v).Error)
		return v
	}
	for name, want := range map[string]string{
		"statement_timeout": "1min", "lock_timeout": "10s", "idle_in_transaction_session_timeout": "1min",
		"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "2", "tcp_user_timeout": "15000",
	} {
		assert.Equal(t, want, show(dsn, name), name)
	}
	assert.Equal(t, "7s", show(dsn+"&statement_timeout=7000", "statement_timeout"), "the URL's own value wins")
	assert.Equal(t, "0", show(dsn+"&default_query_exec_mode=exec", "statement_timeout"), "none through a transaction pooler")
}
