package models_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/fingerprint"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLedgerKeyMadeOnceAndShared: two replicas migrating one empty database at once end with
// one key between them; it is read, never made again, and a ledger whose key went missing is
// refused rather than given a new one (which would change every fingerprint).
func TestLedgerKeyMadeOnceAndShared(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		dsn := testdb.DSN(t, d)
		keys := make([]*fingerprint.Key, 2)
		var wg sync.WaitGroup
		for i := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				db, _, err := models.Open(ctx, dsn)
				if !assert.NoError(t, err) {
					return
				}
				sqlDB, _ := db.DB()
				t.Cleanup(func() { sqlDB.Close() })
				if assert.NoError(t, models.Migrate(ctx, db, d)) {
					keys[i], err = models.LedgerKey(ctx, db, nil)
					assert.NoError(t, err)
				}
			}()
		}
		wg.Wait()
		require.NotNil(t, keys[0])
		require.NotNil(t, keys[1])
		const params = `{"subject":"x"}`
		assert.Equal(t, keys[0].Of("tickets.create", []byte(params)), keys[1].Of("tickets.create", []byte(params)),
			"both replicas fingerprint with one key")

		db, _, err := models.Open(ctx, dsn)
		require.NoError(t, err)
		sqlDB, _ := db.DB()
		defer sqlDB.Close()
		require.NoError(t, models.Migrate(ctx, db, d), "migrating again changes nothing")
		again, err := models.LedgerKey(ctx, db, nil)
		require.NoError(t, err)
		assert.Equal(t, keys[0].DownstreamKey("acme", "k"), again.DownstreamKey("acme", "k"))

		require.NoError(t, db.Exec("DELETE FROM settings WHERE name = 'ledger.key'").Error)
		_, err = models.LedgerKey(ctx, db, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "missing")
	})
}

// TestFingerprintIsKeyed: the ledger's fingerprint is "hmac-sha256:…", not the plain SHA-256
// of the canonical call that anyone could compute to test a guess of a masked param.
func TestFingerprintIsKeyed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l := testdb.Ledger(t, d)
		params := []byte(`{"amount_cents":1999,"card_number":"4242424242424242","currency":"EUR","order_id":"o-1"}`)
		fp := l.Fingerprint("refunds.issue", params)
		sum := sha256.Sum256([]byte(`{"params":` + string(params) + `,"tool":"refunds.issue"}`))
		plain := hex.EncodeToString(sum[:])
		assert.True(t, strings.HasPrefix(fp, "hmac-sha256:"), fp)
		assert.NotContains(t, fp, plain, "the fingerprint is not the plain SHA-256")
		assert.Equal(t, "sha256:"+plain, fingerprint.Legacy("refunds.issue", params), "(the plain form, for comparison)")
		assert.NotEqual(t, fp, testdb.Ledger(t, d).Fingerprint("refunds.issue", params), "another ledger, another key")
	})
}

// legacyOp is an operation as the gateway recorded it before fingerprints were keyed and
// downstream keys derived: the plain fingerprint, no downstream key.
func legacyOp(c *models.Caller, key, params string) models.NewOperation {
	in := newOp(c, key)
	in.Params = []byte(params)
	in.Fingerprint = fingerprint.Legacy(in.Tool, in.Params)
	return in
}

// upgraded is in as this build's gateway submits it: keyed fingerprint, downstream key.
func upgraded(l *models.Ledger, in models.NewOperation) models.NewOperation {
	in.Fingerprint = l.Fingerprint(in.Tool, in.Params)
	in.DownstreamKey = l.DownstreamKey(in.Tenant, in.Key)
	return in
}

// TestOperationsFromBeforeTheUpgrade: an operation recorded with a plain fingerprint still
// replays for a retry with the same call (not 422), still mismatches for another call, keeps
// sending its id as its downstream key, keeps the approvals bound to its fingerprint, and its
// tombstone still answers 410.
func TestOperationsFromBeforeTheUpgrade(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		old := legacyOp(c, "before", `{"subject":"printer"}`)
		old.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
		s, err := l.Submit(ctx, old)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(s.Op.Fingerprint, "sha256:"))
		assert.Nil(t, s.Op.DownstreamKey)
		assert.Equal(t, s.Op.ID, s.Op.DownstreamKeySent(), "a legacy operation keeps sending its id")
		require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1",
			models.AttemptOutcome{Class: "succeeded", To: models.StateSucceeded, Result: []byte(`{"id":"T-1"}`)}))

		replay, err := l.Submit(ctx, upgraded(l, legacyOp(c, "before", `{"subject":"printer"}`)))
		require.NoError(t, err, "a retry of a pre-upgrade operation replays")
		assert.False(t, replay.Created)
		assert.Equal(t, s.Op.ID, replay.Op.ID)
		assert.Equal(t, s.Op.Fingerprint, replay.Op.Fingerprint, "nothing stored is rewritten")

		_, err = l.Submit(ctx, upgraded(l, legacyOp(c, "before", `{"subject":"another"}`)))
		assert.Equal(t, models.CodeKeyMismatch, models.ErrorCode(err), "another call under the key still mismatches")

		// Its tombstone: retention drops the params, the key stays spent.
		_, err = l.Purge(ctx, []string{"tickets.create"}, time.Now().Add(time.Hour), 10)
		require.NoError(t, err)
		_, err = l.Submit(ctx, upgraded(l, legacyOp(c, "before", `{"subject":"printer"}`)))
		assert.Equal(t, models.CodeKeyExpired, models.ErrorCode(err), "a pre-upgrade tombstone is still 410")
		_, err = l.Submit(ctx, upgraded(l, legacyOp(c, "before", `{"subject":"another"}`)))
		assert.Equal(t, models.CodeKeyExpired, models.ErrorCode(err), "whatever the call, as before the upgrade")

		// Awaiting approval across the upgrade: an approval given before counts after.
		wait := legacyOp(c, "payout", `{"subject":"pay"}`)
		wait.NeedsApproval = true
		w, err := l.Submit(ctx, wait)
		require.NoError(t, err)
		a := models.Action{Scope: models.AllTenants(), Tenant: "acme", OperationID: w.Op.ID, Reason: "ok", ExpectedState: models.StateAwaitingApproval}
		a.Actor = "user:ann@example.com"
		first, err := l.Approve(ctx, a, 2, time.Hour)
		require.NoError(t, err)
		require.Equal(t, 1, first.Count)
		replay, err = l.Submit(ctx, upgraded(l, legacyOp(c, "payout", `{"subject":"pay"}`)))
		require.NoError(t, err, "its retry after the upgrade finds it")
		assert.Equal(t, w.Op.ID, replay.Op.ID)
		a.Actor = "user:bob@example.com"
		second, err := l.Approve(ctx, a, 2, time.Hour)
		require.NoError(t, err)
		assert.Equal(t, 2, second.Count, "the approval bound to the plain fingerprint still counts")
		assert.Equal(t, models.StatePending, second.Op.State)
	})
}

// TestDownstreamKeyRecorded: the downstream key is recorded with the operation and read back
// by every read; a new record of the same key (a ledger restored from a backup) gets the same.
func TestDownstreamKeyRecorded(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		in := upgraded(l, newOp(c, "order-1:refund"))
		require.Regexp(t, `^dk_[0-9a-f]{32}$`, in.DownstreamKey)
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		got, err := l.GetByKey(ctx, "acme", "order-1:refund")
		require.NoError(t, err)
		assert.Equal(t, in.DownstreamKey, got.DownstreamKeySent())
		assert.NotEqual(t, s.Op.ID, got.DownstreamKeySent())
		assert.Equal(t, in.DownstreamKey, l.DownstreamKey("acme", "order-1:refund"), "derived from tenant and key alone")
		assert.NotEqual(t, in.DownstreamKey, l.DownstreamKey("acme", "order-2:refund"))
	})
}
