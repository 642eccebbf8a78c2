package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAuditKeyListNeedsNoDataKey (issue 50 item 21): CLI.md says which audit key commands need
// IDEMGATE_DATA_KEY, and they do: generate and rotate do, list (public halves only) does not. CLI.md
// said every one of them needs it.
func TestAuditKeyListNeedsNoDataKey(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/CLI.md"))
	require.NoError(t, err)
	sec := docSection(string(b), "### `idemgate audit key`")
	require.NotEmpty(t, sec)
	assert.NotContains(t, sec, "which every one of these needs")
	assert.Contains(t, strings.Join(strings.Fields(sec), " "), "`list` prints only public halves and needs no data key")

	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		c := newCLILedger(t, d)
		_, _, err := c.run(t, "audit", "key", "generate")
		require.NoError(t, err)
		c.dataKey = ""
		_, stderr, err := c.run(t, "audit", "key", "rotate")
		require.Error(t, err, "rotate needs the data key")
		assert.Contains(t, err.Error()+stderr, "IDEMGATE_DATA_KEY")
		out, stderr, err := c.run(t, "audit", "key", "list")
		require.NoError(t, err, "list without IDEMGATE_DATA_KEY: %s", stderr)
		assert.NotEmpty(t, strings.TrimSpace(out), "the public key is listed")
	})
}
