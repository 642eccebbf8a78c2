package models_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAuthenticationIsRememberedBriefly: a key that authenticated is not read again while it
// is fresh, so an API replay costs the ledger one read in all.
func TestAuthenticationIsRememberedBriefly(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, _, rec := countedLedger(t, d)
		ctx := context.Background()
		k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent-2", nil)
		require.NoError(t, err)
		rec.take()

		first, err := l.Authenticate(ctx, k.Secret)
		require.NoError(t, err)
		assert.Equal(t, []string{"SELECT", "UPDATE"}, tallyOf(rec.take()).outside,
			"a cold key is read once, and its first use in the minute noted (APIKey.LastUsedAt)")
		again, err := l.Authenticate(ctx, k.Secret)
		require.NoError(t, err)
		assert.Empty(t, rec.take(), "a warm key costs no round trip")
		assert.Equal(t, first, again)

		// The caller handed out is a copy: changing it does not change the next one.
		again.PrincipalName = "someone-else"
		third, err := l.Authenticate(ctx, k.Secret)
		require.NoError(t, err)
		assert.Equal(t, "agent-2", third.PrincipalName)

		// Unknown keys are never remembered: each costs its read, and cannot fill the cache.
		for range 2 {
			_, err = l.Authenticate(ctx, "idg_"+strings.Repeat("A", 43))
			assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
		}
		assert.Len(t, tallyOf(rec.take()).outside, 2)
	})
}

// rememberedKey returns a ledger that remembers keys for ttl, and a key of tenant acme it has
// just authenticated (so remembers).
func rememberedKey(t *testing.T, d models.Dialect, ttl time.Duration) (*models.Ledger, *models.NewKey) {
	t.Helper()
	l := models.New(models.Config{DB: testdb.Open(t, d), Dialect: d, KeyCacheTTL: ttl})
	ctx := context.Background()
	_, err := l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
	require.NoError(t, err)
	k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent-1", nil)
	require.NoError(t, err)
	_, err = l.Authenticate(ctx, k.Secret)
	require.NoError(t, err)
	return l, k
}

// TestRevokedKeyIsRefusedAtOnce: both ways of revoking make the very next request with the
// key fail, though the key was remembered a moment before.
func TestRevokedKeyIsRefusedAtOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, byPrefix := rememberedKey(t, d, time.Hour) // only the revocation can make it forget
		ctx := context.Background()
		_, err := l.RevokeAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, byPrefix.Key.Prefix)
		require.NoError(t, err)
		_, err = l.Authenticate(ctx, byPrefix.Secret)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "revoked with the CLI's call")

		byID, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent-2", nil)
		require.NoError(t, err)
		caller, err := l.Authenticate(ctx, byID.Secret)
		require.NoError(t, err)
		_, err = l.RevokeAPIKeyByID(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, caller.Key.ID)
		require.NoError(t, err)
		_, err = l.Authenticate(ctx, byID.Secret)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "revoked from the console")
	})
}

// TestKeyRevokedElsewhereExpires: a revocation no notification reaches (another process on
// SQLite writes it) is believed at most the cache's TTL later.
func TestKeyRevokedElsewhereExpires(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, k := rememberedKey(t, d, 300*time.Millisecond)
		ctx := context.Background()

		// Another process's revocation: another ledger, whose notification l does not hear
		// (l runs no listener, as none runs on SQLite).
		other := models.New(models.Config{DB: l.DB(), Dialect: d})
		_, err := other.RevokeAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, k.Key.Prefix)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			_, err := l.Authenticate(ctx, k.Secret)
			return models.ErrorCode(err) == models.CodeNotFound
		}, 10*time.Second, 20*time.Millisecond, "the TTL ends the belief")
	})
}

// TestKeyRevokedOnAnotherReplica: on PostgreSQL the revocation's notification makes every
// listening replica forget the key, long before its TTL.
func TestKeyRevokedOnAnotherReplica(t *testing.T) {
	dsn := testdb.DSN(t, models.Postgres)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(ttl time.Duration) *models.Ledger {
		db, d, err := models.Open(ctx, dsn)
		require.NoError(t, err)
		sqlDB, _ := db.DB()
		t.Cleanup(func() { sqlDB.Close() })
		require.NoError(t, models.Migrate(ctx, db, d))
		return models.New(models.Config{DB: db, Dialect: d, KeyCacheTTL: ttl})
	}
	a, b := open(0), open(time.Hour)
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		b.Listen(ctx, dsn, testLogger(t))
	}()
	defer func() { cancel(); <-listening }()

	_, err := a.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
	require.NoError(t, err)
	k, err := a.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent-1", nil)
	require.NoError(t, err)

	// The listener forgets every key when it connects; b must learn the key after that, or
	// the test would pass without any notification. A probe notification heard by b proves
	// its listener is connected.
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
	_, err = b.Authenticate(ctx, k.Secret)
	require.NoError(t, err)

	_, err = a.RevokeAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, k.Key.Prefix)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := b.Authenticate(ctx, k.Secret)
		return models.ErrorCode(err) == models.CodeNotFound
	}, 10*time.Second, 10*time.Millisecond, "the other replica forgets the revoked key, an hour before its TTL")
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}
