package export_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

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
	sum := sha256.Sum256(join(ls[:len(ls)-1]))
	var tr export.Trailer
	require.NoError(t, json.Unmarshal(ls[len(ls)-1], &tr))
	tr.ExportSHA256 = hex.EncodeToString(sum[:])
	b, err := json.Marshal(tr)
	require.NoError(t, err)
	ls[len(ls)-1] = append(b, '\n')
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
			v, err := export.VerifyFile(bytes.NewReader(ndjson))
			require.NoError(t, err)
			assert.Equal(t, export.NDJSON, v.Format)
			assert.Equal(t, res.Operations, v.Operations)
			assert.Equal(t, res.Events, v.Events)
			assert.Equal(t, res.SHA256, v.SHA256)
			assert.Equal(t, res.Entry.Hash, v.Entry.Hash)

			v, err = export.VerifyFile(bytes.NewReader(csvFile))
			require.NoError(t, err)
			assert.Equal(t, export.CSV, v.Format)
			assert.Equal(t, csvRes.Entry.Seq, v.Entry.Seq)
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
			{"trailer removed", ndjson, removeLine(4), "trailer (line 4)"},
			{"trailer chain head edited", ndjson, editLine(-1, fmt.Sprintf(`"chain_head":{"seq":%d`, seq), fmt.Sprintf(`"chain_head":{"seq":%d`, seq+1)),
				fmt.Sprintf("chain head %d", seq+1)},
			{"trailer audit entry edited", ndjson, editLine(-1, `"actor":"user:ann@example.com"`, `"actor":"user:bob@example.com"`), fmt.Sprintf("audit entry %d does not match its hash", seq)},
			{"trailer filter edited", ndjson, editLine(-1, `"filter":{"tenant":"acme"}`, `"filter":{"tenant":"globex"}`), "records filter"},
			{"trailer respaced", ndjson, editLine(-1, `"filter":`, `"filter": `), "not in the form the exporter writes"},
			{"trailer member added", ndjson, editLine(-1, `"filter":`, `"note":"x","filter":`), "unknown field"},
			{"digest rewritten with the line", ndjson, forgeDigest, fmt.Sprintf("audit entry %d records digest", seq)},
			{"truncated", ndjson, func(t *testing.T, b []byte) []byte { return b[:len(b)/2] }, "trailer"},
			{"empty", ndjson, func(t *testing.T, b []byte) []byte { return nil }, "the file is empty"},
			{"csv: one byte of a row", csvFile, editLine(1, "SUCCEEDED", "SUCCEEDEE"), "the lines before the trailer hash to"},
			{"csv: a row removed", csvFile, removeLine(2), "a line was edited, added or removed"},
			{"csv: header edited", csvFile, editLine(0, "operation_id", "operation-id"), "a line was edited"},
			{"csv: trailer edited", csvFile, editLine(-1, `""outcome"":""ok""`, `""outcome"":""ko""`), "does not match its hash"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				changed := tc.tamper(t, tc.file)
				require.NotEqual(t, tc.file, changed)
				_, err := export.VerifyFile(bytes.NewReader(changed))
				var invalid *export.Invalid
				require.True(t, errors.As(err, &invalid), "want *export.Invalid, got %v", err)
				assert.Contains(t, err.Error(), tc.want)
			})
		}
	})
}
