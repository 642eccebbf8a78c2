package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeFile writes b to a file of its own and returns the path.
func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, b, 0o600))
	return p
}

// keyFile runs `audit key list` into a KEYFILE.
func (c *cliLedger) keyFile(t *testing.T) (string, models.AuditKeySet) {
	t.Helper()
	out, _, err := c.run(t, "audit", "key", "list")
	require.NoError(t, err)
	set, err := models.ParseAuditKeySet([]byte(out))
	require.NoError(t, err)
	return writeFile(t, "keys.json", []byte(out)), set
}

var keyLineRE = regexp.MustCompile(`^audit signing key ([0-9a-f]{16}) \(Ed25519\), valid from \S+\n$`)

func TestAuditSignedExportCommand(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		c := newCLILedger(t, d)
		out, _, err := c.run(t, "audit", "key", "rotate")
		require.ErrorContains(t, err, "no audit signing key to rotate")
		assert.Empty(t, out)
		out, _, err = c.run(t, "audit", "key", "generate")
		require.NoError(t, err)
		require.Regexp(t, keyLineRE, out)
		first := keyLineRE.FindStringSubmatch(out)[1]
		_, _, err = c.run(t, "audit", "key", "generate")
		require.ErrorContains(t, err, "exists: rotate it")

		keys, set := c.keyFile(t)
		require.Len(t, set.Keys, 1)
		assert.Equal(t, first, set.Keys[0].KeyID)
		out, _, err = c.run(t, "audit", "key", "list", "--pem", first)
		require.NoError(t, err)
		assert.Equal(t, set.Keys[0].PEM, out)

		ndjson := c.exportFile(t, "--tenant", "acme")
		csvOut, _, err := c.run(t, "export", "--format", "csv")
		require.NoError(t, err)
		csvPath := writeFile(t, "export.csv", []byte(csvOut))
		file, err := os.ReadFile(ndjson)
		require.NoError(t, err)
		offline := &cliLedger{dsn: filepath.Join(t.TempDir(), "missing", "no.db")} // would fail to open

		t.Run("genuine exports pass offline", func(t *testing.T) {
			for _, p := range []string{ndjson, csvPath} {
				out, _, err := offline.run(t, "audit", "verify", "--export", p, "--key", keys)
				require.NoError(t, err)
				assert.Contains(t, out, "signed by audit key "+first+" at ")
			}
		})
		t.Run("a forged export fails offline", func(t *testing.T) {
			forged := writeFile(t, "forged.ndjson", forge(t, file))
			_, _, err := offline.run(t, "audit", "verify", "--export", forged)
			require.ErrorContains(t, err, "nothing was verified cryptographically", "without the key the check cannot tell, and says so")
			_, _, err = offline.run(t, "audit", "verify", "--export", forged, "--allow-unsigned")
			require.NoError(t, err, "consistent: without the key the check cannot tell")
			_, _, err = offline.run(t, "audit", "verify", "--export", forged, "--key", keys)
			require.ErrorContains(t, err, "the signature does not match")
		})
		t.Run("signatures are required with a key file", func(t *testing.T) {
			ls := exportLines(file)
			ls[len(ls)-1] = []byte(`{"key_id":"","signature":""}` + "\n")
			_, _, err := offline.run(t, "audit", "verify", "--export", writeFile(t, "unsigned.ndjson", bytes.Join(ls, nil)), "--key", keys)
			require.ErrorContains(t, err, "the export is not signed")
		})

		// A rotation: the export signed before still verifies with the published keys, for the
		// time it was signed; the same key's signature dated outside its window does not.
		out, _, err = c.run(t, "audit", "key", "rotate")
		require.NoError(t, err)
		require.Regexp(t, keyLineRE, out)
		second := keyLineRE.FindStringSubmatch(out)[1]
		assert.NotEqual(t, first, second)
		keys2, set2 := c.keyFile(t)
		require.Len(t, set2.Keys, 2)
		require.NotNil(t, set2.Keys[0].NotAfter, "the rotated-out key keeps its public half and gets an end")

		t.Run("signed by a rotated-out key inside its window", func(t *testing.T) {
			out, _, err := offline.run(t, "audit", "verify", "--export", ndjson, "--key", keys2)
			require.NoError(t, err)
			assert.Contains(t, out, "signed by audit key "+first)
			later := c.exportFile(t, "--tenant", "acme")
			out, _, err = offline.run(t, "audit", "verify", "--export", later, "--key", keys2)
			require.NoError(t, err)
			assert.Contains(t, out, "signed by audit key "+second)
		})
		t.Run("signed by a key outside its window", func(t *testing.T) {
			early := set2
			early.Keys = append([]models.AuditPublicKey(nil), set2.Keys...)
			end := early.Keys[0].NotBefore.Add(time.Microsecond) // retired before the export was made
			early.Keys[0].NotAfter = &end
			b, err := json.Marshal(early)
			require.NoError(t, err)
			_, _, err = offline.run(t, "audit", "verify", "--export", ndjson, "--key", writeFile(t, "early.json", b))
			require.ErrorContains(t, err, "which signs only from")
		})
	})
}

func TestAuditExportCommand(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		c := newCLILedger(t, d)
		_, _, err := c.run(t, "audit", "key", "generate")
		require.NoError(t, err)
		c.exportFile(t)
		keys, _ := c.keyFile(t)

		out, stderr, err := c.run(t, "audit", "export")
		require.NoError(t, err)
		entries := seededEntries + 2 // the set-up's, the key's generation, the export's
		assert.Contains(t, stderr, fmt.Sprintf("exported %d audit entries", entries))
		path := writeFile(t, "audit.ndjson", []byte(out))
		ls := exportLines([]byte(out))
		require.Len(t, ls, entries+2, "one line per entry, the trailer, the signature")
		var r models.AuditRecord
		require.NoError(t, json.Unmarshal(ls[0], &r))
		assert.Equal(t, "1", r.EventID)
		assert.Nil(t, r.PreviousHash, "the chain's first entry")

		v, _, err := c.run(t, "audit", "verify", "--export", path, "--key", keys)
		require.NoError(t, err)
		assert.Contains(t, v, fmt.Sprintf("export ok: audit log, %d entries", entries))
		_, _, err = c.run(t, "audit", "verify", "--export", path, "--key", keys, "--ledger")
		require.NoError(t, err, "its own entry is in the chain")

		t.Run("an entry edited and every hash after it recomputed", func(t *testing.T) {
			forged := forgeAuditExport(t, []byte(out), 2)
			_, _, err := c.run(t, "audit", "verify", "--export", writeFile(t, "forged.ndjson", forged), "--allow-unsigned")
			require.NoError(t, err, "consistent without the key")
			_, _, err = c.run(t, "audit", "verify", "--export", writeFile(t, "forged.ndjson", forged), "--key", keys)
			require.ErrorContains(t, err, "the signature does not match")
		})
		t.Run("an entry removed", func(t *testing.T) {
			cut := bytes.Join(append(append([][]byte{}, ls[:2]...), ls[3:]...), nil)
			_, _, err := c.run(t, "audit", "verify", "--export", writeFile(t, "cut.ndjson", cut), "--key", keys)
			require.ErrorContains(t, err, "audit chain broken at entry 3")
		})
		t.Run("a range", func(t *testing.T) {
			out, _, err := c.run(t, "audit", "export", "--from", "2020-01-01", "--to", "2020-01-02")
			require.NoError(t, err)
			assert.Equal(t, 2, strings.Count(out, "\n"), "no entry in range: the trailer and signature alone")
			_, _, err = c.run(t, "audit", "verify", "--export", writeFile(t, "empty.ndjson", []byte(out)), "--key", keys)
			require.NoError(t, err)
		})
		_, _, err = c.run(t, "audit", "export", "--from", "2026-02-01", "--to", "2026-01-01")
		require.ErrorContains(t, err, "the time range is empty")
	})
}

// forgeAuditExport edits entry n of an audit log export and recomputes, as a forger would,
// every hash and link from there, the digest, and the export's own entry in the trailer.
func forgeAuditExport(t *testing.T, file []byte, n int) []byte {
	t.Helper()
	ls := exportLines(bytes.Clone(file))
	body := ls[:len(ls)-2]
	prev := ""
	for i := range body {
		var r models.AuditRecord
		require.NoError(t, json.Unmarshal(body[i], &r))
		e, err := r.Entry()
		require.NoError(t, err)
		if i == n-1 {
			e.Actor = "user:mallory@example.com"
		}
		if i > 0 {
			e.PrevHash = prev
		}
		e.Hash = e.ComputeHash()
		prev = e.Hash
		b, err := json.Marshal(e.Record())
		require.NoError(t, err)
		body[i] = append(b, '\n')
	}
	sum := sha256.Sum256(bytes.Join(body, nil))
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
	tr.AuditEntry, tr.ChainHead, tr.ExportSHA256 = e.Record(), export.ChainHead{Seq: e.Seq, Hash: e.Hash}, digest
	line, err := json.Marshal(tr)
	require.NoError(t, err)
	ls[len(ls)-2] = append(line, '\n')
	return bytes.Join(ls, nil)
}
