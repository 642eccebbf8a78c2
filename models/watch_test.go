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

// TestOnlyWatchedChangesNotifyOtherReplicas: a change notifies the other replicas' listeners
// only when a waiter of another process watches the operation (Ledger.Watch). Replica b
// watches one of two operations replica a runs; a settles the unwatched one first, then the
// watched one. b hears the watched one; notifications arrive in commit order, so had the
// unwatched one been announced, b would have heard it first.
func TestOnlyWatchedChangesNotifyOtherReplicas(t *testing.T) {
	dsn := testdb.DSN(t, models.Postgres)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() *models.Ledger {
		db, d, err := models.Open(ctx, dsn)
		require.NoError(t, err)
		sqlDB, _ := db.DB()
		t.Cleanup(func() { sqlDB.Close() })
		require.NoError(t, models.Migrate(ctx, db, d))
		return models.New(models.Config{DB: db, Dialect: d})
	}
	a, b := open(), open()
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		b.Listen(ctx, dsn, testLogger(t))
	}()
	defer func() { cancel(); <-listening }()
	require.Eventually(t, func() bool {
		heard, stop := b.Changes().Subscribe("probe")
		defer stop()
		require.NoError(t, a.DB().Exec("SELECT pg_notify('idemgate_operations', 'probe')").Error)
		select {
		case <-heard:
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}, 10*time.Second, time.Millisecond, "b's listener connects")

	_, err := a.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
	require.NoError(t, err)
	k, err := a.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent-1", nil)
	require.NoError(t, err)
	c, err := a.Authenticate(ctx, k.Secret)
	require.NoError(t, err)
	claim := func(key string) models.Claimed {
		in := newOp(c, key)
		in.Claim = &models.ClaimSpec{Worker: "a", LeaseFor: time.Minute}
		s, err := a.Submit(ctx, in)
		require.NoError(t, err)
		return models.Claimed{Op: s.Op, Attempt: s.Attempt}
	}
	unwatched, watched := claim("unwatched"), claim("watched")

	heardUnwatched, stop := b.Changes().Subscribe(unwatched.Op.ID)
	defer stop()
	heardWatched, stop := b.Changes().Subscribe(watched.Op.ID)
	defer stop()
	seen, err := b.Watch(ctx, "acme", watched.Op.ID)
	require.NoError(t, err)
	assert.Equal(t, models.StateRunning, seen.State)
	again, err := b.Watch(ctx, "acme", watched.Op.ID)
	require.NoError(t, err, "a second watcher reads the operation too")
	assert.Equal(t, watched.Op.ID, again.ID)

	require.NoError(t, a.FinishAttempt(ctx, unwatched, "a", succeeded))
	require.NoError(t, a.FinishAttempt(ctx, watched, "a", succeeded))
	select {
	case <-heardWatched:
	case <-time.After(30 * time.Second):
		t.Fatal("b never heard the change of the operation it watches")
	}
	select {
	case <-heardUnwatched:
		t.Fatal("the change of an operation nobody watches was announced to the other replicas")
	default:
	}
	settled, err := b.Watch(ctx, "acme", watched.Op.ID)
	require.NoError(t, err)
	assert.Equal(t, models.StateSucceeded, settled.State, "a watcher reads the operation as it stands")
}

// TestWatchReadsOnSQLite: SQLite has one process and no notifications: Watch is a read.
func TestWatchReadsOnSQLite(t *testing.T) {
	l, c := setup(t, models.SQLite)
	ctx := context.Background()
	in := newOp(c, "k")
	in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
	s, err := l.Submit(ctx, in)
	require.NoError(t, err)
	op, err := l.Watch(ctx, c.Tenant, s.Op.ID)
	require.NoError(t, err)
	assert.Equal(t, models.StateRunning, op.State)
	_, err = l.Watch(ctx, "other", s.Op.ID)
	assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "another tenant's operation is not found")
}
