package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runSecretCommand runs `idemgate args…` against dsn with stdin and the data key dataKey
// ("" for none).
func runSecretCommand(t *testing.T, dsn, dataKey, stdin string, args ...string) result {
	t.Helper()
	return runStdin(t, dsn, map[string]string{"IDEMGATE_DATA_KEY": dataKey}, stdin, args...)
}

// runSecretCommandEnv runs `idemgate args…` against dsn with extra environment variables.
func runSecretCommandEnv(t *testing.T, dsn string, env map[string]string, args ...string) result {
	t.Helper()
	return runStdin(t, dsn, env, "", args...)
}

func runStdin(t *testing.T, dsn string, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vars := map[string]string{"IDEMGATE_DATABASE_URL": dsn}
	for k, v := range env {
		vars[k] = v
	}
	var out, errOut bytes.Buffer
	err := run(ctx, args, func(k string) string { return vars[k] }, strings.NewReader(stdin), &out, &errOut)
	return result{out.String(), errOut.String(), err}
}

// TestSecretCommands: `idemgate secret set` seals the first line of standard input under the
// data key (and refuses without one), `list` prints names and times but never a value,
// `delete` removes one; the ledger opens the value for the downstream only.
func TestSecretCommands(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		dsn := migratedDSN(t, d)
		key := datakey.Generate()
		for _, tenant := range []string{"acme", "globex"} {
			require.NoError(t, runSecretCommand(t, dsn, "", "", "tenant", "create", tenant).err)
		}
		const value = "sk_live_tenant_value_8842"

		r := runSecretCommand(t, dsn, "", value+"\n", "secret", "set", "--tenant", "acme", "stripe_key")
		require.Error(t, r.err, "no data key: refused")
		assert.Contains(t, r.err.Error(), "IDEMGATE_DATA_KEY")

		r = runSecretCommand(t, dsn, key, value+"\nsecond line ignored\n", "secret", "set", "--tenant", "acme", "stripe_key")
		require.NoError(t, r.err, r.stderr)
		assert.NotContains(t, r.stdout, value)
		require.NoError(t, runSecretCommand(t, dsn, key, "other-value-1234\n", "secret", "set", "--tenant", "globex", "stripe_key").err)
		assert.Error(t, runSecretCommand(t, dsn, key, "v\n", "secret", "set", "--tenant", "nope", "stripe_key").err, "unknown tenant")
		assert.Error(t, runSecretCommand(t, dsn, key, "v\n", "secret", "set", "--tenant", "acme", "Bad Name").err, "bad name")
		assert.Error(t, runSecretCommand(t, dsn, key, "", "secret", "set", "--tenant", "acme", "empty").err, "no value")

		list := runSecretCommand(t, dsn, "", "", "secret", "list")
		require.NoError(t, list.err)
		assert.Contains(t, list.stdout, "acme")
		assert.Contains(t, list.stdout, "globex")
		assert.Contains(t, list.stdout, "stripe_key")
		assert.NotContains(t, list.stdout, value)
		assert.NotContains(t, list.stdout, "other-value-1234")
		only := runSecretCommand(t, dsn, "", "", "secret", "list", "--tenant", "globex")
		require.NoError(t, only.err)
		assert.NotContains(t, only.stdout, "acme")

		db, dialect, err := models.Open(context.Background(), dsn)
		require.NoError(t, err)
		keys, err := datakey.Parse(key, "")
		require.NoError(t, err)
		l := models.New(models.Config{DB: db, Dialect: dialect, DataKeys: keys})
		got, err := l.TenantSecret(context.Background(), "acme", "stripe_key")
		require.NoError(t, err)
		assert.Equal(t, value, got, "the first line, sealed and opened")
		var sealed []string
		require.NoError(t, db.Raw("SELECT sealed FROM tenant_secrets").Scan(&sealed).Error)
		assert.NotContains(t, strings.Join(sealed, " "), value, "never stored in clear")

		// Rotation: sealed anew under the next key, the old one then no longer needed.
		next := datakey.Generate()
		rot := runSecretCommandEnv(t, dsn, map[string]string{"IDEMGATE_DATA_KEY": next, "IDEMGATE_DATA_KEYS_OLD": key}, "datakey", "rotate")
		require.NoError(t, rot.err, rot.stderr)
		assert.Contains(t, rot.stdout, "2 tenant secrets re-encrypted")
		nextKeys, err := datakey.Parse(next, "")
		require.NoError(t, err)
		got, err = models.New(models.Config{DB: db, Dialect: dialect, DataKeys: nextKeys}).TenantSecret(context.Background(), "acme", "stripe_key")
		require.NoError(t, err)
		assert.Equal(t, value, got, "opened with the new key alone")

		require.NoError(t, runSecretCommand(t, dsn, "", "", "secret", "delete", "--tenant", "acme", "stripe_key").err)
		assert.Error(t, runSecretCommand(t, dsn, "", "", "secret", "delete", "--tenant", "acme", "stripe_key").err, "already gone")
		_, err = l.TenantSecret(context.Background(), "acme", "stripe_key")
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
}

// TestServeRefusesUnresolvedConnections: the gateway does not start with a tools file whose
// connection needs an environment variable that is not set, or tenant secrets without a data
// key; the message names the connection and the reference, never a value.
func TestServeRefusesUnresolvedConnections(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tools := func(auth string) string {
		path := filepath.Join(dir, strings.NewReplacer("{", "", "}", "", ":", "", " ", "").Replace(auth)+".yaml")
		require.NoError(t, os.WriteFile(path, []byte(`
connections:
  - name: payments
    base_url: https://payments.example
    auth: {header: {name: X-Api-Key, value: `+auth+`}}
tools:
  - name: payments.create
    description: Create a payment
    effect: write
    params_schema: {type: object}
    http: {connection: payments, url: /v1/payments}
`), 0o600))
		return path
	}
	dsn := filepath.Join(dir, "ledger.db")
	r := runSecretCommandEnv(t, dsn, nil, "serve", "--addr", "127.0.0.1:0", "--tools", tools("{env: PAYMENTS_KEY}"))
	require.Error(t, r.err)
	assert.Contains(t, r.err.Error(), `connection "payments": auth.header.value: {env: PAYMENTS_KEY}: the environment variable is not set`)

	r = runSecretCommandEnv(t, dsn, nil, "serve", "--addr", "127.0.0.1:0", "--tools", tools("{tenant: payments_key}"))
	require.Error(t, r.err)
	assert.Contains(t, r.err.Error(), `connection "payments"`)
	assert.Contains(t, r.err.Error(), "IDEMGATE_DATA_KEY")
}
