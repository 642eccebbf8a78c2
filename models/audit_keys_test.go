package models_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testClock is a settable clock for ledgers in tests.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// keyedLedger is a ledger over db with data keys kr and the clock c.
func keyedLedger(t *testing.T, d models.Dialect, kr *datakey.Keyring, c *testClock) (*models.Ledger, func(*datakey.Keyring) *models.Ledger) {
	t.Helper()
	db := testdb.Open(t, d)
	key, err := models.LedgerKey(context.Background(), db, kr) // seals the ledger's key under kr
	require.NoError(t, err)
	with := func(kr *datakey.Keyring) *models.Ledger {
		return models.New(models.Config{DB: db, Dialect: d, Key: key, DataKeys: kr, Now: c.Now})
	}
	return with(kr), with
}

func mustKeyring(t *testing.T, current, old string) *datakey.Keyring {
	t.Helper()
	kr, err := datakey.Parse(current, old)
	require.NoError(t, err)
	return kr
}

func TestAuditSigningKeys(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		dk := datakey.Generate()
		c := &testClock{now: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
		l, with := keyedLedger(t, d, mustKeyring(t, dk, ""), c)
		cli := models.Requester{Actor: models.ActorCLI}

		_, err := with(nil).GenerateAuditKey(ctx, cli)
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), "never stored in clear: %v", err)
		_, err = l.RotateAuditKey(ctx, cli)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "nothing to rotate: %v", err)
		_, _, err = l.SignAudit(ctx, c.Now(), []byte("x"))
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "no key, no signature: %v", err)

		first, err := l.GenerateAuditKey(ctx, cli)
		require.NoError(t, err)
		assert.Equal(t, models.AuditKeyAlgorithm, first.Algorithm)
		assert.Contains(t, first.PEM, "-----BEGIN PUBLIC KEY-----")
		assert.Nil(t, first.NotAfter)
		_, err = l.GenerateAuditKey(ctx, cli)
		assert.Equal(t, models.CodeConflict, models.ErrorCode(err), "one current key: %v", err)

		c.add(time.Hour)
		before := c.Now()
		id, sig, err := l.SignAudit(ctx, before, []byte("statement"))
		require.NoError(t, err)
		assert.Equal(t, first.KeyID, id)
		require.Error(t, with(nil).AuditSigningReady(ctx), "sealed: a ledger without data keys cannot sign")

		c.add(time.Hour)
		second, err := l.RotateAuditKey(ctx, cli)
		require.NoError(t, err)
		assert.NotEqual(t, first.KeyID, second.KeyID)
		keys, err := l.AuditKeys(ctx)
		require.NoError(t, err)
		require.Len(t, keys.Keys, 2, "the retired key stays published")
		require.NotNil(t, keys.Keys[0].NotAfter)
		assert.True(t, keys.Keys[0].NotAfter.Equal(second.NotBefore), "the windows meet at the rotation")

		require.NoError(t, keys.Verify(id, before, []byte("statement"), sig), "signed inside its window")
		assert.ErrorContains(t, keys.Verify(id, c.Now(), []byte("statement"), sig), "which signs only from",
			"the rotated-out key does not vouch for a time after its rotation")
		assert.ErrorContains(t, keys.Verify(id, before, []byte("statemenT"), sig), "does not match")
		assert.ErrorContains(t, keys.Verify(second.KeyID, before, []byte("statement"), sig), "does not match")
		id, _, err = l.SignAudit(ctx, before, []byte("late"))
		require.NoError(t, err)
		assert.Equal(t, first.KeyID, id, "a statement made before the rotation is signed with the key of its time")
		id, _, err = l.SignAudit(ctx, c.Now(), []byte("now"))
		require.NoError(t, err)
		assert.Equal(t, second.KeyID, id)

		// The key set round-trips through a KEYFILE, and a key whose id is not its own is refused.
		b, err := jsonMarshal(keys)
		require.NoError(t, err)
		parsed, err := models.ParseAuditKeySet(b)
		require.NoError(t, err)
		require.NoError(t, parsed.Verify(first.KeyID, before, []byte("statement"), sig))
		keys.Keys[0].KeyID = second.KeyID
		b, _ = jsonMarshal(keys)
		_, err = models.ParseAuditKeySet(b)
		assert.ErrorContains(t, err, "its id is")

		// A data-key rotation reseals both keys, and signing works with the new data key alone.
		dk2 := datakey.Generate()
		r, err := with(mustKeyring(t, dk2, dk)).RotateDataKeys(ctx, func(string, []byte) ([]byte, bool, error) { return nil, false, nil }, 100)
		require.NoError(t, err)
		assert.Equal(t, 2, r.AuditKeys)
		require.NoError(t, with(mustKeyring(t, dk2, "")).AuditSigningReady(ctx))
		_, _, err = with(mustKeyring(t, dk2, "")).SignAudit(ctx, before, []byte("x"))
		require.NoError(t, err, "the retired key opens under the new data key too")

		var actions []string
		require.NoError(t, l.DB().Table("audit_log").Order("seq").Pluck("action", &actions).Error)
		assert.Equal(t, []string{models.AuditKeyGenerate, models.AuditKeyRotate}, actions)
	})
}

func TestAuditCheckpointsSigned(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		c := &testClock{now: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
		l, with := keyedLedger(t, d, mustKeyring(t, datakey.Generate(), ""), c)
		appendN(t, l, 3)
		cp, err := l.VerifyAuditChain(ctx)
		require.NoError(t, err)
		assert.Empty(t, cp.Signature, "without a key, the checkpoint is unsigned")

		_, err = l.GenerateAuditKey(ctx, models.Requester{Actor: models.ActorCLI})
		require.NoError(t, err)
		stored, _, err := l.LastAuditVerification(ctx)
		require.NoError(t, err)
		keys, err := l.AuditKeys(ctx)
		require.NoError(t, err)
		require.NoError(t, stored.VerifySignature(keys), "the key's generation signs the checkpoint recorded before")
		assert.Equal(t, int64(3), stored.Seq)

		c.add(time.Minute)
		appendN(t, l, 2)
		cp, err = l.VerifyAuditChain(ctx)
		require.NoError(t, err)
		require.NoError(t, cp.VerifySignature(keys))
		assert.Equal(t, int64(6), cp.Seq, "three entries, the key's generation, two more")
		_, err = with(nil).VerifyAuditChain(ctx)
		assert.ErrorContains(t, err, "cannot be signed", "a key exists: a checkpoint is never recorded unsigned")

		for _, tc := range []struct {
			name string
			edit func(cp *models.AuditCheckpoint)
		}{
			{"signature removed", func(cp *models.AuditCheckpoint) { cp.Signature, cp.KeyID = "", "" }},
			{"head moved back, signature kept", func(cp *models.AuditCheckpoint) { cp.Seq, cp.Hash = 1, firstHash(t, l) }},
			{"signature of another statement", func(cp *models.AuditCheckpoint) {
				cp.Signature = base64.StdEncoding.EncodeToString(make([]byte, 64))
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				edited := cp
				tc.edit(&edited)
				b, err := jsonMarshal(edited)
				require.NoError(t, err)
				require.NoError(t, l.DB().Exec("UPDATE settings SET value = ? WHERE name = ?", string(b), models.AuditCheckpointSetting).Error)
				_, err = l.VerifyAuditChain(ctx)
				var br *models.ChainBreak
				require.True(t, errors.As(err, &br), "%v", err)
				assert.Contains(t, br.Reason, "no valid signature")
			})
		}
	})
}

func firstHash(t *testing.T, l *models.Ledger) string {
	t.Helper()
	e, err := l.AuditEntryAt(context.Background(), 1)
	require.NoError(t, err)
	return e.Hash
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
