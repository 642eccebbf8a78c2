package models_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

const sealedCard = "4000056655665556"

func keyring(t *testing.T, current, old string) *datakey.Keyring {
	t.Helper()
	kr, err := datakey.Parse(current, old)
	require.NoError(t, err)
	return kr
}

// cardOp is a refund with a card number, masked as the catalogue masks it.
func cardOp(l *models.Ledger, c *models.Caller, key string) models.NewOperation {
	in := newOp(c, key)
	in.Tool = "refunds.issue"
	in.Params = []byte(`{"amount_cents":5,"card_number":"` + sealedCard + `","order_id":"o-1"}`)
	in.Masked = []byte(`{"amount_cents":5,"card_number":"***","order_id":"o-1"}`)
	return upgraded(l, in)
}

// storedRow reads what a database reader sees of an operation.
func storedRow(t *testing.T, db *gorm.DB, id string) (params, sealed *string) {
	t.Helper()
	row := struct{ Params, ParamsSealed *string }{}
	require.NoError(t, db.Raw("SELECT params, params_sealed FROM operations WHERE id = ?", id).Scan(&row).Error)
	return row.Params, row.ParamsSealed
}

// TestSensitiveParamsSealedAtRest: with a data key, the stored params hold "***" where the
// card was and the card exists only sealed, which is unreadable without the key; the worker
// still gets the params in clear, replays still match, and retention drops both.
func TestSensitiveParamsSealedAtRest(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		db := testdb.Open(t, d)
		k1 := datakey.Generate()
		l := models.New(models.Config{DB: db, Dialect: d, Key: testdb.Key(t, db), DataKeys: keyring(t, k1, "")})
		c := callerOf(t, l)

		in := cardOp(l, c, "card")
		s, err := l.Submit(ctx, in)
		require.NoError(t, err)
		params, sealed := storedRow(t, db, s.Op.ID)
		require.NotNil(t, params)
		require.NotNil(t, sealed)
		assert.JSONEq(t, string(in.Masked), *params, "the params column is masked")
		assert.NotContains(t, *sealed, sealedCard)
		assert.NotContains(t, *sealed, "5556", "not even in part")
		var dump []string
		require.NoError(t, db.Raw("SELECT COALESCE(params,'') || COALESCE(params_sealed,'') || COALESCE(result,'') FROM operations").Scan(&dump).Error)
		assert.NotContains(t, strings.Join(dump, ""), sealedCard, "no column of the table shows the card")

		clear, err := l.Params(s.Op)
		require.NoError(t, err)
		assert.JSONEq(t, string(in.Params), string(clear), "the downstream receives the card")
		replay, err := l.Submit(ctx, cardOp(l, c, "card"))
		require.NoError(t, err, "the replay matches on the fingerprint of the clear params")
		assert.False(t, replay.Created)

		// A database reader, or a replica started without the key, cannot open it.
		noKey := models.New(models.Config{DB: db, Dialect: d, Key: testdb.Key(t, db)})
		_, err = noKey.Params(s.Op)
		assert.ErrorContains(t, err, "IDEMGATE_DATA_KEY")
		assert.ErrorContains(t, noKey.CheckDataKeys(ctx), "IDEMGATE_DATA_KEY is not set")
		wrong := models.New(models.Config{DB: db, Dialect: d, Key: testdb.Key(t, db), DataKeys: keyring(t, datakey.Generate(), "")})
		_, err = wrong.Params(s.Op)
		assert.Error(t, err, "another key does not open it")
		assert.NoError(t, l.CheckDataKeys(ctx))

		// A tool without sensitive params is stored as it is.
		plain := upgraded(l, newOp(c, "plain"))
		p, err := l.Submit(ctx, plain)
		require.NoError(t, err)
		params, sealed = storedRow(t, db, p.Op.ID)
		assert.Nil(t, sealed)
		assert.Equal(t, string(plain.Params), *params)

		// Retention drops the sealed copy with the rest.
		cancelled, err := l.Cancel(ctx, "acme", s.Op.ID, "api:agent")
		require.NoError(t, err)
		require.Equal(t, models.StateFailedFinal, cancelled.State)
		_, err = l.Purge(ctx, []string{"refunds.issue"}, time.Now().Add(time.Hour), 10)
		require.NoError(t, err)
		params, sealed = storedRow(t, db, s.Op.ID)
		assert.Nil(t, params)
		assert.Nil(t, sealed, "retention drops the sealed params")
	})
}

// TestRotateDataKeys: rotation reseals what an old key sealed under the current key, seals
// what was kept in clear before a key was set, and finds nothing to do the second time.
func TestRotateDataKeys(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		db := testdb.Open(t, d)
		key := testdb.Key(t, db)
		k1, k2 := datakey.Generate(), datakey.Generate()
		before := models.New(models.Config{DB: db, Dialect: d, Key: key})
		c := callerOf(t, before)
		clearOp, err := before.Submit(ctx, cardOp(before, c, "kept-in-clear"))
		require.NoError(t, err)
		params, _ := storedRow(t, db, clearOp.Op.ID)
		require.Contains(t, *params, sealedCard, "without a key the card is stored in clear")

		// A gateway started with k1 seals the ledger's key under it.
		_, err = models.LedgerKey(ctx, db, keyring(t, k1, ""))
		require.NoError(t, err)
		first := models.New(models.Config{DB: db, Dialect: d, Key: key, DataKeys: keyring(t, k1, "")})
		old, err := first.Submit(ctx, cardOp(first, c, "sealed-under-k1"))
		require.NoError(t, err)
		plainOp, err := first.Submit(ctx, upgraded(first, newOp(c, "no-secrets")))
		require.NoError(t, err)

		rotated := models.New(models.Config{DB: db, Dialect: d, Key: key, DataKeys: keyring(t, k2, k1)})
		mask := func(tool string, params []byte) ([]byte, bool, error) {
			if tool != "refunds.issue" {
				return nil, false, nil
			}
			return []byte(strings.ReplaceAll(string(params), sealedCard, "***")), true, nil
		}
		r, err := rotated.RotateDataKeys(ctx, mask, 1)
		require.NoError(t, err)
		assert.Equal(t, models.Rotation{Resealed: 1, Sealed: 1, LedgerKey: true}, r)
		r, err = rotated.RotateDataKeys(ctx, mask, 10)
		require.NoError(t, err)
		assert.Equal(t, models.Rotation{}, r, "nothing left to do")

		onlyK2 := models.New(models.Config{DB: db, Dialect: d, Key: key, DataKeys: keyring(t, k2, "")})
		for _, id := range []string{clearOp.Op.ID, old.Op.ID} {
			op, err := onlyK2.Get(ctx, "acme", id)
			require.NoError(t, err)
			assert.NotContains(t, *op.Params, sealedCard)
			got, err := onlyK2.Params(op)
			require.NoError(t, err, "after rotation the old key is no longer needed")
			assert.Contains(t, string(got), sealedCard)
		}
		after, err := models.LedgerKey(ctx, db, keyring(t, k2, ""))
		require.NoError(t, err, "the ledger's key opens with the new data key alone")
		assert.Equal(t, key.DownstreamKey("acme", "k"), after.DownstreamKey("acme", "k"), "and is the same key")
		_, err = models.LedgerKey(ctx, db, nil)
		assert.ErrorContains(t, err, "sealed", "a reader without the data key does not get the ledger's key")
		params, sealed := storedRow(t, db, plainOp.Op.ID)
		assert.Nil(t, sealed, "params without secrets stay as they are")
		assert.NotNil(t, params)

		_, err = before.RotateDataKeys(ctx, mask, 10)
		assert.Error(t, err, "no key to rotate to")
	})
}

// callerOf sets up tenant acme and an agent's key on l.
func callerOf(t *testing.T, l *models.Ledger) *models.Caller {
	t.Helper()
	ctx := context.Background()
	_, err := l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme")
	require.NoError(t, err)
	k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent-1", nil)
	require.NoError(t, err)
	c, err := l.Authenticate(ctx, k.Secret)
	require.NoError(t, err)
	return c
}
