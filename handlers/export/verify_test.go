package export_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lines splits a file into its lines, each with its newline.
func lines(b []byte) [][]byte {
	return bytes.SplitAfter(b, []byte("\n"))[:bytes.Count(b, []byte("\n"))]
}

func join(ls [][]byte) []byte { return bytes.Join(ls, nil) }

// tamper returns a changed copy of an export.
type tamper func(t *testing.T, file []byte) []byte

// editLine changes one byte (the first occurrence of old in line i) of a copy.
func editLine(i int, old, new string) tamper {
	return func(t *testing.T, file []byte) []byte {
		ls := lines(bytes.Clone(file))
		if i < 0 {
			i = len(ls) + i
		}
		require.Contains(t, string(ls[i]), old)
		ls[i] = []byte(strings.Replace(string(ls[i]), old, new, 1))
		return join(ls)
	}
}

func removeLine(i int) tamper {
	return func(t *testing.T, file []byte) []byte {
		ls := lines(bytes.Clone(file))
		return join(append(ls[:i:i], ls[i+1:]...))
	}
}

// forgeDigest edits an operation line and writes the new digest into the trailer, but cannot
// re-sign the audit entry that records the old one.
func forgeDigest(t *testing.T, file []byte) []byte {
	ls := lines(bytes.Clone(file))
	ls[0] = bytes.Replace(ls[0], []byte(`"SUCCEEDED"`), []byte(`"FAILED_FINAL"`), 1)
	sum := sha256.Sum256(join(ls[:len(ls)-2]))
	var tr export.Trailer
	require.NoError(t, json.Unmarshal(ls[len(ls)-2], &tr))
	tr.ExportSHA256 = hex.EncodeToString(sum[:])
	b, err := json.Marshal(tr)
	require.NoError(t, err)
	ls[len(ls)-2] = append(b, '\n')
	return join(ls)
}

// forgeAll is the forgery of issue 39: an amount changed, then everything that vouches for the
// file recomputed as docs/AUDIT.md describes it (the digest, the audit entry's detail and hash,
// the chain head). Only the signature, which needs the private key, is left as it was; resign,
// when given, signs the forged trailer (a stolen key) after moving its entry's time.
func forgeAll(t *testing.T, file []byte, at time.Time, resign *models.AuditSigner) []byte {
	t.Helper()
	ls := lines(bytes.Clone(file))
	require.Contains(t, string(ls[0]), `"amount":1999`)
	ls[0] = bytes.Replace(ls[0], []byte(`"amount":1999`), []byte(`"amount":9999`), 1)
	sum := sha256.Sum256(join(ls[:len(ls)-2]))
	digest := hex.EncodeToString(sum[:])
	var tr export.Trailer
	require.NoError(t, json.Unmarshal(ls[len(ls)-2], &tr))
	var d map[string]any
	require.NoError(t, json.Unmarshal([]byte(tr.AuditEntry.Extensions.Idemgate.Detail), &d))
	d["export_sha256"] = digest
	b, err := json.Marshal(d)
	require.NoError(t, err)
	e, err := tr.AuditEntry.Entry()
	require.NoError(t, err)
	e.Detail = string(b)
	if !at.IsZero() {
		e.At = at
	}
	e.Hash = e.ComputeHash()
	tr.AuditEntry, tr.ChainHead, tr.ExportSHA256 = e.Record(), export.ChainHead{Seq: e.Seq, Hash: e.Hash}, digest
	line, err := json.Marshal(tr)
	require.NoError(t, err)
	ls[len(ls)-2] = append(line, '\n')
	if resign != nil {
		sig, err := json.Marshal(export.Signature{KeyID: resign.KeyID(), Signature: base64.StdEncoding.EncodeToString(resign.Sign(ls[len(ls)-2]))})
		require.NoError(t, err)
		ls[len(ls)-1] = append(sig, '\n')
	}
	return join(ls)
}

func TestVerifyFile(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		f := newFixture(t, d)
		ndjson, res := f.runExport(t, export.NDJSON, export.Filter{Tenant: "acme"})
		csvFile, csvRes := f.runExport(t, export.CSV, export.Filter{})
		// The fixture's tenants and keys come first in the chain, each with its entry.
		seq := res.Entry.Seq

		t.Run("untouched", func(t *testing.T) {
			v, err := export.VerifyFile(bytes.NewReader(ndjson), &f.keys)
			require.NoError(t, err)
			assert.Equal(t, export.NDJSON, v.Format)
			assert.Equal(t, res.Operations, v.Operations)
			assert.Equal(t, res.Events, v.Events)
			assert.Equal(t, res.SHA256, v.SHA256)
			assert.Equal(t, res.Entry.Hash, v.Entry.Hash)
			assert.Equal(t, f.keys.Keys[0].KeyID, v.KeyID, "the signature was checked")

			v, err = export.VerifyFile(bytes.NewReader(csvFile), &f.keys)
			require.NoError(t, err)
			assert.Equal(t, export.CSV, v.Format)
			assert.Equal(t, csvRes.Entry.Seq, v.Entry.Seq)
			assert.Equal(t, f.keys.Keys[0].KeyID, v.KeyID)

			v, err = export.VerifyFile(bytes.NewReader(ndjson), nil)
			require.NoError(t, err)
			assert.Empty(t, v.KeyID, "without keys the signature is not checked")
		})

		cases := []struct {
			name   string
			file   []byte
			tamper tamper
			want   string
		}{
			{"one byte of an operation line", ndjson, editLine(0, `"SUCCEEDED"`, `"SUCCEEDEE"`), "the lines before the trailer hash to"},
			{"one byte of an event", ndjson, editLine(2, `"actor":"worker:w1"`, `"actor":"worker:w2"`), "a line was edited"},
			{"a line removed", ndjson, removeLine(1), "the file holds 3 operations"},
			{"a line duplicated", ndjson, func(t *testing.T, b []byte) []byte { ls := lines(b); return join(append([][]byte{ls[0]}, ls...)) }, "the lines before the trailer hash to"},
			{"a line that is not an operation", ndjson, editLine(1, `{"id":`, `{"idx":`), "line 2 is not an exported operation"},
			{"trailer removed", ndjson, removeLine(4), "trailer (lines 4 and 5)"},
			{"signature line removed", ndjson, removeLine(5), "trailer (lines 4 and 5)"},
			{"trailer chain head edited", ndjson, editLine(-2, fmt.Sprintf(`"chain_head":{"seq":%d`, seq), fmt.Sprintf(`"chain_head":{"seq":%d`, seq+1)),
				fmt.Sprintf("chain head %d", seq+1)},
			{"trailer audit entry edited", ndjson, editLine(-2, `"principal_id":"user:ann@example.com"`, `"principal_id":"user:bob@example.com"`), fmt.Sprintf("audit entry %d does not match its hash", seq)},
			{"trailer filter edited", ndjson, editLine(-2, `"filter":{"tenant":"acme"}`, `"filter":{"tenant":"globex"}`), "records filter"},
			{"trailer respaced", ndjson, editLine(-2, `"filter":`, `"filter": `), "not in the form the exporter writes"},
			{"trailer member added", ndjson, editLine(-2, `"filter":`, `"note":"x","filter":`), "unknown field"},
			{"digest rewritten with the line", ndjson, forgeDigest, fmt.Sprintf("audit entry %d records digest", seq)},
			{"everything rewritten but the signature", ndjson, func(t *testing.T, b []byte) []byte { return forgeAll(t, b, time.Time{}, nil) },
				"the signature does not match"},
			{"everything rewritten, signature dropped", ndjson, func(t *testing.T, b []byte) []byte {
				ls := lines(forgeAll(t, b, time.Time{}, nil))
				ls[len(ls)-1] = []byte(`{"key_id":"","signature":""}` + "\n")
				return join(ls)
			}, "the export is not signed"},
			{"signature of another key named", ndjson, editLine(-1, `"key_id":"`, `"key_id":"0`), "the signature line names key"},
			{"truncated", ndjson, func(t *testing.T, b []byte) []byte { return b[:len(b)/2] }, "trailer"},
			{"empty", ndjson, func(t *testing.T, b []byte) []byte { return nil }, "no trailer"},
			{"csv: one byte of a row", csvFile, editLine(1, "SUCCEEDED", "SUCCEEDEE"), "the lines before the trailer hash to"},
			{"csv: a row removed", csvFile, removeLine(2), "a line was edited, added or removed"},
			{"csv: header edited", csvFile, editLine(0, "operation_id", "operation-id"), "a line was edited"},
			{"csv: trailer edited", csvFile, editLine(-2, `""outcome"":""allowed""`, `""outcome"":""denied""`), "does not match its hash"},
			{"csv: signature edited", csvFile, func(t *testing.T, b []byte) []byte {
				ls := lines(bytes.Clone(b))
				last := ls[len(ls)-1]
				i := bytes.IndexByte(last[len("#signature,"):], ',') + len("#signature,") + 1
				last[i] = map[bool]byte{true: 'B', false: 'A'}[last[i] == 'A'] // another base64 digit first
				return join(ls)
			}, "the signature does not match"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				changed := tc.tamper(t, tc.file)
				require.NotEqual(t, tc.file, changed)
				_, err := export.VerifyFile(bytes.NewReader(changed), &f.keys)
				var invalid *export.Invalid
				require.True(t, errors.As(err, &invalid), "want *export.Invalid, got %v", err)
				assert.Contains(t, err.Error(), tc.want)
			})
		}
		t.Run("a consistent forgery passes only the unsigned check", func(t *testing.T) {
			_, err := export.VerifyFile(bytes.NewReader(forgeAll(t, ndjson, time.Time{}, nil)), nil)
			require.NoError(t, err, "without the key, a recomputed file is consistent: what the signature is for")
		})
	})
}

// TestVerifyFileAcrossRotation: a file signed before a rotation keeps verifying with the
// published keys; a file signed with the retired key and dated after its rotation does not.
func TestVerifyFileAcrossRotation(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		f := newFixture(t, d)
		before, res := f.runExport(t, export.NDJSON, export.Filter{Tenant: "acme"})
		f.clock.Set(t0.Add(48 * time.Hour))
		_, err := f.l.RotateAuditKey(ctx, models.Requester{Actor: models.ActorCLI})
		require.NoError(t, err)
		keys, err := f.l.AuditKeys(ctx)
		require.NoError(t, err)
		require.Len(t, keys.Keys, 2)
		f.clock.Set(t0.Add(72 * time.Hour))
		after, _ := f.runExport(t, export.NDJSON, export.Filter{Tenant: "acme"})

		v, err := export.VerifyFile(bytes.NewReader(before), &keys)
		require.NoError(t, err, "signed by the retired key inside its window")
		assert.Equal(t, keys.Keys[0].KeyID, v.KeyID)
		v, err = export.VerifyFile(bytes.NewReader(after), &keys)
		require.NoError(t, err)
		assert.Equal(t, keys.Keys[1].KeyID, v.KeyID, "signed by the current key")

		retired, err := f.l.AuditSigner(ctx, res.Entry.At)
		require.NoError(t, err)
		require.Equal(t, keys.Keys[0].KeyID, retired.KeyID())
		forged := forgeAll(t, before, t0.Add(72*time.Hour), retired)
		_, err = export.VerifyFile(bytes.NewReader(forged), &keys)
		require.ErrorContains(t, err, "which signs only from", "the retired key's signature does not vouch for a later time")
		same := forgeAll(t, before, time.Time{}, retired)
		_, err = export.VerifyFile(bytes.NewReader(same), &keys)
		require.NoError(t, err, "the check itself: re-signed inside the window, the forgery passes, so the window is what refused it above")
	})
}
