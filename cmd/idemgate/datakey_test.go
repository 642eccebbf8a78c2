package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runWith runs one command against c's ledger with extra environment variables.
func (c *cliLedger) runWith(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vars := map[string]string{"IDEMGATE_DATABASE_URL": c.dsn, "IDEMGATE_TOOLS": c.tools}
	for k, v := range env {
		vars[k] = v
	}
	var out, errOut bytes.Buffer
	err := run(ctx, args, func(k string) string { return vars[k] }, strings.NewReader(""), &out, &errOut)
	return out.String(), err
}

// TestDatakeyRotate: `idemgate datakey rotate` seals what was stored in clear before a data
// key was set, re-encrypts under a new key what the old one sealed, and after it the old key
// is no longer needed; without a key it refuses. Each run is in the audit log.
func TestDatakeyRotate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		c := newCLILedger(t, d)
		ctx := context.Background()
		stored := func() string {
			var rows []string
			require.NoError(t, c.l.DB().Raw("SELECT COALESCE(params,'') || ' ' || COALESCE(params_sealed,'') FROM operations").Scan(&rows).Error)
			return strings.Join(rows, "\n")
		}
		require.Contains(t, stored(), cliCard, "recorded without a data key: in clear")

		_, err := c.runWith(t, nil, "datakey", "rotate")
		assert.ErrorContains(t, err, "IDEMGATE_DATA_KEY is not set")

		k1, err := c.runWith(t, nil, "datakey", "generate")
		require.NoError(t, err)
		k1 = strings.TrimSpace(k1)
		_, err = datakey.Parse(k1, "")
		require.NoError(t, err, "generate prints a usable key")
		k2 := datakey.Generate()

		out, err := c.runWith(t, map[string]string{"IDEMGATE_DATA_KEY": k1}, "datakey", "rotate")
		require.NoError(t, err)
		assert.Contains(t, out, "0 values re-encrypted from older keys, 5 sealed that were stored in clear")
		assert.NotContains(t, stored(), cliCard, "sealed: no column shows the card")

		out, err = c.runWith(t, map[string]string{"IDEMGATE_DATA_KEY": k2, "IDEMGATE_DATA_KEYS_OLD": k1}, "datakey", "rotate")
		require.NoError(t, err)
		assert.Contains(t, out, "5 values re-encrypted from older keys, 0 sealed")

		onlyK2, err := datakey.Parse(k2, "")
		require.NoError(t, err)
		l := models.New(models.Config{DB: c.l.DB(), Dialect: d, DataKeys: onlyK2})
		ops, _, err := l.List(ctx, "acme", models.ListFilter{Limit: 10})
		require.NoError(t, err)
		require.Len(t, ops, 2)
		for _, op := range ops {
			clear, err := l.Params(op)
			require.NoError(t, err, "the new key alone opens everything")
			assert.Contains(t, string(clear), cliCard)
		}

		entries, _, err := c.l.AuditEntries(ctx, models.AllTenants(), models.AuditSearch{Action: models.AuditDataKeyRotate, Limit: 10})
		require.NoError(t, err)
		assert.Len(t, entries, 2, "each rotation is audited")
	})
}
