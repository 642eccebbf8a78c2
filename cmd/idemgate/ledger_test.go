package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// migratedDSN is a test database's URL after `idemgate migrate` made its ledger, as an operator
// does first: the other commands refuse an SQLite ledger that does not exist yet.
func migratedDSN(t *testing.T, d models.Dialect) string {
	t.Helper()
	dsn := testdb.DSN(t, d)
	require.NoError(t, runCommand(t, dsn, "migrate").err)
	return dsn
}

// TestCommandsRefuseAMissingLedger (issue 50 item 18): a command run where no SQLite ledger
// exists does not create an empty one and answer as if the ledger were empty (`audit key list`
// listed no keys); it refuses, naming the path it looked for, and leaves no file behind. serve,
// worker and migrate create the ledger (migrate is how an operator makes one first).
func TestCommandsRefuseAMissingLedger(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "idemgate.db")
	for _, args := range [][]string{{"audit", "key", "list"}, {"tenant", "create", "acme"}, {"export", "--format", "ndjson"},
		{"audit", "verify"}, {"webhook", "list"}} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, func(k string) string {
			if k == "IDEMGATE_DATABASE_URL" {
				return path
			}
			return ""
		}, strings.NewReader(""), &stdout, &stderr)
		require.Error(t, err, "idemgate %s", strings.Join(args, " "))
		assert.Contains(t, err.Error(), "no ledger at "+path, "idemgate %s", strings.Join(args, " "))
		_, statErr := os.Stat(path)
		assert.True(t, os.IsNotExist(statErr), "idemgate %s created %s", strings.Join(args, " "), path)
	}
	require.NoError(t, runCommand(t, path, "migrate").err, "migrate creates the ledger")
	assert.NoError(t, runCommand(t, path, "audit", "key", "list").err, "then the others open it")
}
