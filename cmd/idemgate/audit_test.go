package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAuditVerifyCommand(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Run("untouched ledger", func(t *testing.T) {
			c := newCLILedger(t, d)
			c.exportFile(t)
			out, _, err := c.run(t, "audit", "verify")
			require.NoError(t, err)
			assert.Regexp(t, fmt.Sprintf(`^audit chain ok: %d entries, head [0-9a-f]{64}\n$`, seededEntries+1), out)
			cp, ok, err := c.l.LastAuditVerification(context.Background())
			require.NoError(t, err)
			require.True(t, ok, "the verified head is recorded")
			assert.Equal(t, int64(seededEntries+1), cp.Seq)
		})
		t.Run("entry updated in SQL", func(t *testing.T) {
			c := newCLILedger(t, d)
			c.exportFile(t)
			c.exportFile(t)
			require.NoError(t, c.l.DB().Exec("UPDATE audit_log SET actor = 'user:mallory@example.com' WHERE seq = 1").Error)
			_, _, err := c.run(t, "audit", "verify")
			require.ErrorContains(t, err, "audit chain broken at entry 1")
		})
		t.Run("tail removed after a verification", func(t *testing.T) {
			c := newCLILedger(t, d)
			c.exportFile(t)
			c.exportFile(t)
			_, _, err := c.run(t, "audit", "verify")
			require.NoError(t, err)
			last := seededEntries + 2
			require.NoError(t, c.l.DB().Exec("DELETE FROM audit_log WHERE seq = ?", last).Error)
			_, _, err = c.run(t, "audit", "verify")
			require.ErrorContains(t, err, fmt.Sprintf("audit chain broken at entry %d", last))
			assert.ErrorContains(t, err, "tail removed")
		})
		t.Run("chain rewritten after a verification", func(t *testing.T) {
			c := newCLILedger(t, d)
			c.exportFile(t)
			_, _, err := c.run(t, "audit", "verify")
			require.NoError(t, err)
			require.NoError(t, c.l.DB().Exec("DELETE FROM audit_log").Error)
			// As many fresh entries as were verified: a chain of the same length, rewritten.
			for range seededEntries + 1 {
				_, err = c.l.Audit(context.Background(), models.AuditInput{Actor: "cli", Action: "export.created", Outcome: "ok"})
				require.NoError(t, err)
			}
			_, _, err = c.run(t, "audit", "verify")
			require.ErrorContains(t, err, fmt.Sprintf("audit chain broken at entry %d", seededEntries+1))
			assert.ErrorContains(t, err, "rewritten")
		})
	})
}

func TestAuditVerifyExportCommand(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		c := newCLILedger(t, d)
		path := c.exportFile(t, "--tenant", "acme")
		file, err := os.ReadFile(path)
		require.NoError(t, err)
		write := func(t *testing.T, b []byte) string {
			p := filepath.Join(t.TempDir(), "changed.ndjson")
			require.NoError(t, os.WriteFile(p, b, 0o600))
			return p
		}

		t.Run("untouched, offline", func(t *testing.T) {
			offline := &cliLedger{dsn: filepath.Join(t.TempDir(), "missing", "no.db")} // would fail to open
			_, _, err := offline.run(t, "audit", "verify", "--export", path)
			require.ErrorContains(t, err, "nothing was verified cryptographically", "without a key, consistency alone is not a pass")
			out, _, err := offline.run(t, "audit", "verify", "--export", path, "--allow-unsigned")
			require.NoError(t, err)
			assert.Regexp(t, fmt.Sprintf(`^export ok: ndjson, 2 operations, 2 events, sha256 [0-9a-f]{64}, audit entry %d [0-9a-f]{64}\n$`, seededEntries+1), out)
		})
		t.Run("untouched, against the ledger", func(t *testing.T) {
			out, _, err := c.run(t, "audit", "verify", "--export", path, "--ledger")
			require.NoError(t, err)
			assert.Contains(t, out, fmt.Sprintf("audit entry %d is in the ledger's chain", seededEntries+1))
		})
		t.Run("one byte changed", func(t *testing.T) {
			changed := bytes.Replace(file, []byte(`"state":"PENDING"`), []byte(`"state":"PENDINH"`), 1)
			_, _, err := c.run(t, "audit", "verify", "--export", write(t, changed))
			require.ErrorContains(t, err, "a line was edited, added or removed")
		})
		t.Run("a line removed", func(t *testing.T) {
			ls := exportLines(file)
			_, _, err := c.run(t, "audit", "verify", "--export", write(t, bytes.Join(append(ls[:1:1], ls[2:]...), nil)))
			require.ErrorContains(t, err, "the file holds 1 operations")
		})
		t.Run("trailer edited", func(t *testing.T) {
			changed := bytes.Replace(file, []byte(`"outcome":"allowed"`), []byte(`"outcome":"denied"`), 1)
			_, _, err := c.run(t, "audit", "verify", "--export", write(t, changed))
			require.ErrorContains(t, err, fmt.Sprintf("audit entry %d does not match its hash", seededEntries+1))
		})
		t.Run("forged with a recomputed entry: only the ledger tells", func(t *testing.T) {
			forged := write(t, forge(t, file))
			_, _, err := c.run(t, "audit", "verify", "--export", forged, "--allow-unsigned")
			require.NoError(t, err, "a consistent forgery passes the offline consistency check")
			_, _, err = c.run(t, "audit", "verify", "--export", forged, "--ledger")
			require.ErrorContains(t, err, "the export's entry was not recorded")
		})
	})
}

func exportLines(b []byte) [][]byte {
	return bytes.SplitAfter(b, []byte("\n"))[:bytes.Count(b, []byte("\n"))]
}

// forge rewrites an operation line and everything that vouches for it in the trailer: the
// digest, the audit entry's detail and hash, the chain head.
func forge(t *testing.T, file []byte) []byte {
	t.Helper()
	ls := exportLines(bytes.Clone(file))
	ls[0] = bytes.Replace(ls[0], []byte(`"state":"PENDING"`), []byte(`"state":"SUCCEEDED"`), 1)
	sum := sha256.Sum256(bytes.Join(ls[:len(ls)-2], nil))
	digest := hex.EncodeToString(sum[:])
	var tr export.Trailer
	require.NoError(t, json.Unmarshal(ls[len(ls)-2], &tr))
	var detail map[string]any
	require.NoError(t, json.Unmarshal([]byte(tr.AuditEntry.Extensions.Idemgate.Detail), &detail))
	detail["export_sha256"] = digest
	b, err := json.Marshal(detail)
	require.NoError(t, err)
	e, err := tr.AuditEntry.Entry()
	require.NoError(t, err)
	e.Detail = string(b)
	e.Hash = e.ComputeHash()
	tr.AuditEntry = e.Record()
	tr.ChainHead.Hash, tr.ExportSHA256 = e.Hash, digest
	out, err := json.Marshal(tr)
	require.NoError(t, err)
	ls[len(ls)-2] = append(out, '\n')
	return bytes.Join(ls, nil)
}
