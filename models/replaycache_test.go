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

// replicas opens n ledgers on one PostgreSQL schema, each with its listener running once the
// function returns (a notification sent on the schema has reached every one).
func replicas(t *testing.T, n int, listen bool) []*models.Ledger {
	t.Helper()
	dsn := testdb.DSN(t, models.Postgres)
	ctx, cancel := context.WithCancel(context.Background())
	var out []*models.Ledger
	var done []chan struct{}
	t.Cleanup(func() {
		cancel()
		for _, d := range done {
			<-d
		}
	})
	for range n {
		l := ledgerOn(t, dsn)
		out = append(out, l)
		if !listen {
			continue
		}
		stopped := make(chan struct{})
		done = append(done, stopped)
		go func() {
			defer close(stopped)
			l.Listen(ctx, dsn, testLogger(t))
		}()
		listening(t, l)
	}
	return out
}

// ledgerOn opens a migrated ledger on dsn, closed when the test ends.
func ledgerOn(t *testing.T, dsn string) *models.Ledger {
	t.Helper()
	db, d, err := models.Open(context.Background(), dsn)
	require.NoError(t, err)
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	require.NoError(t, models.Migrate(context.Background(), db, d))
	return models.New(models.Config{DB: db, Dialect: d})
}

// listening returns once l's listener hears notifications (and so its replay cache is live).
func listening(t *testing.T, l *models.Ledger) {
	t.Helper()
	require.Eventually(t, func() bool {
		heard, stop := l.Changes().Subscribe("probe")
		defer stop()
		require.NoError(t, l.DB().Exec("SELECT pg_notify('idemgate_operations', 'probe')").Error)
		select {
		case <-heard:
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}, 10*time.Second, time.Millisecond, "the listener connects")
}

// succeededOn records a new operation under key on l and runs it to SUCCEEDED.
func succeededOn(t *testing.T, l *models.Ledger, c *models.Caller, key string) *models.Operation {
	t.Helper()
	ctx := context.Background()
	in := newOp(c, key)
	in.Claim = &models.ClaimSpec{Worker: "a", LeaseFor: time.Minute}
	s, err := l.Submit(ctx, in)
	require.NoError(t, err)
	require.True(t, s.Created)
	require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "a", succeeded))
	return s.Op
}

// replay submits key again on l, as a retry of the same call does.
func replay(t *testing.T, l *models.Ledger, c *models.Caller, key string) (models.Submitted, error) {
	t.Helper()
	return l.Submit(context.Background(), newOp(c, key))
}

// cached proves that l answers key from its replay cache: the row is changed behind the
// ledger's back (no notification), and the replay still answers the result it had.
func cached(t *testing.T, l *models.Ledger, c *models.Caller, key string) {
	t.Helper()
	s, err := replay(t, l, c, key)
	require.NoError(t, err)
	require.False(t, s.Created)
	require.NotNil(t, s.Op.Result)
	before := *s.Op.Result
	require.NoError(t, l.DB().Exec("UPDATE operations SET result = ? WHERE tenant = ? AND op_key = ?",
		`{"changed":"behind the ledger's back"}`, c.Tenant, key).Error)
	again, err := replay(t, l, c, key)
	require.NoError(t, err)
	assert.Equal(t, before, *again.Op.Result, "the replay is answered from the cache")
	require.NoError(t, l.DB().Exec("UPDATE operations SET result = ? WHERE tenant = ? AND op_key = ?",
		before, c.Tenant, key).Error)
}

// TestReplayCacheForgetsACompensatedOperationOnEveryReplica: replica b answers a replay of a's
// operation from its cache; a links a compensation to it; b's next replays name the
// compensation, without any read of b's that would have found it on its own.
func TestReplayCacheForgetsACompensatedOperationOnEveryReplica(t *testing.T) {
	rs := replicas(t, 2, true)
	a, b := rs[0], rs[1]
	ctx := context.Background()
	c := agentOf(ctx, t, a)
	orig := succeededOn(t, a, c, "refund-1")
	cached(t, b, c, "refund-1")
	cached(t, a, c, "refund-1")

	comp := newOp(c, "undo-refund-1")
	comp.Compensates = orig.ID
	s, err := a.Submit(ctx, comp)
	require.NoError(t, err)
	require.True(t, s.Created)

	onA, err := replay(t, a, c, "refund-1")
	require.NoError(t, err)
	require.NotNil(t, onA.Op.CompensatedBy, "the replica that linked it forgets at once")
	assert.Equal(t, s.Op.ID, *onA.Op.CompensatedBy)
	require.Eventually(t, func() bool {
		onB, err := replay(t, b, c, "refund-1")
		require.NoError(t, err)
		return onB.Op.CompensatedBy != nil && *onB.Op.CompensatedBy == s.Op.ID
	}, 10*time.Second, 5*time.Millisecond, "the other replica forgets when the notification arrives")
	cached(t, b, c, "refund-1") // and keeps the new answer
}

// TestReplayCacheForgetsPurgedOperationsOnEveryReplica: after a retention purge on a, a key
// b had cached answers "expired" on b too.
func TestReplayCacheForgetsPurgedOperationsOnEveryReplica(t *testing.T) {
	rs := replicas(t, 2, true)
	a, b := rs[0], rs[1]
	ctx := context.Background()
	c := agentOf(ctx, t, a)
	succeededOn(t, a, c, "refund-2")
	cached(t, b, c, "refund-2")

	n, err := a.Purge(ctx, []string{"tickets.create"}, time.Now().Add(time.Hour), 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = replay(t, a, c, "refund-2")
	assert.Equal(t, models.CodeKeyExpired, models.ErrorCode(err), "on the replica that purged: %v", err)
	require.Eventually(t, func() bool {
		_, err := replay(t, b, c, "refund-2")
		return models.ErrorCode(err) == models.CodeKeyExpired
	}, 10*time.Second, 5*time.Millisecond, "the other replica forgets when the notification arrives")
}

// TestReplayCacheNeedsAListener: a ledger that hears no notifications (SQLite, or PostgreSQL
// without a listener) reads every replay from the database, so a change made elsewhere is
// answered at once.
func TestReplayCacheNeedsAListener(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		var l *models.Ledger
		var c *models.Caller
		if d == models.Postgres {
			l = replicas(t, 1, false)[0]
			c = agentOf(ctx, t, l)
		} else {
			l, c = setup(t, d)
		}
		succeededOn(t, l, c, "refund-3")
		for range 2 {
			_, err := replay(t, l, c, "refund-3")
			require.NoError(t, err)
		}
		require.NoError(t, l.DB().Exec("UPDATE operations SET result = ? WHERE op_key = ?", `{"id":"elsewhere"}`, "refund-3").Error)
		s, err := replay(t, l, c, "refund-3")
		require.NoError(t, err)
		assert.JSONEq(t, `{"id":"elsewhere"}`, *s.Op.Result)
	})
}

// TestReplayCacheStopsWhenItsListenerStops: a replica whose listener stops forgets what it
// had cached and reads every replay, as it hears no notification; once its listener's
// session is cut (a failover, a network cut) it forgets as well, before it listens again.
func TestReplayCacheStopsWhenItsListenerStops(t *testing.T) {
	dsn := testdb.DSN(t, models.Postgres)
	ctx := context.Background()
	l := ledgerOn(t, dsn)
	c := agentOf(ctx, t, l)
	succeededOn(t, l, c, "refund-4")
	listen := func() (stop func()) {
		lctx, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			l.Listen(lctx, dsn, testLogger(t))
		}()
		listening(t, l)
		return func() { cancel(); <-stopped }
	}
	changeBehind := func(result string) {
		require.NoError(t, l.DB().Exec("UPDATE operations SET result = ? WHERE op_key = ?", result, "refund-4").Error)
	}

	stop := listen()
	cached(t, l, c, "refund-4")
	stop()
	changeBehind(`{"id":"while deaf"}`)
	s, err := replay(t, l, c, "refund-4")
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"while deaf"}`, *s.Op.Result, "no cache without a listener")

	stop = listen()
	defer stop()
	cached(t, l, c, "refund-4")
	require.NoError(t, l.DB().Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ? AND datname = current_database()",
		models.ListenerApplicationName).Error)
	require.Eventually(t, func() bool {
		changeBehind(`{"id":"after the cut"}`)
		s, err := replay(t, l, c, "refund-4")
		require.NoError(t, err)
		return *s.Op.Result == `{"id":"after the cut"}`
	}, 10*time.Second, 5*time.Millisecond, "the cache is dropped with its listener's session")
}

// TestReplayCacheKeepsOnlyWhatCannotChange: an operation that is not terminal is read every
// time, so its replays see it finish.
func TestReplayCacheKeepsOnlyWhatCannotChange(t *testing.T) {
	l := replicas(t, 1, true)[0]
	ctx := context.Background()
	c := agentOf(ctx, t, l)
	in := newOp(c, "running")
	in.Claim = &models.ClaimSpec{Worker: "a", LeaseFor: time.Minute}
	s, err := l.Submit(ctx, in)
	require.NoError(t, err)
	for range 2 {
		again, err := replay(t, l, c, "running")
		require.NoError(t, err)
		require.Equal(t, models.StateRunning, again.Op.State)
	}
	require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "a", succeeded))
	done, err := replay(t, l, c, "running")
	require.NoError(t, err)
	assert.Equal(t, models.StateSucceeded, done.Op.State, "a RUNNING operation was not kept")
}
