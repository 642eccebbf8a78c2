package export_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runExport exports with filter f in format, as a console user of every tenant.
func (f *fixture) runExport(t *testing.T, format export.Format, filter export.Filter) ([]byte, export.Result) {
	t.Helper()
	return f.runScopedExport(t, format, models.AllTenants(), filter)
}

// runScopedExport exports with filter f in format, as a console user of scope s.
func (f *fixture) runScopedExport(t *testing.T, format export.Format, s models.Scope, filter export.Filter) ([]byte, export.Result) {
	t.Helper()
	var buf bytes.Buffer
	x := export.Exporter{Ledger: f.l, Catalog: f.cat, BatchSize: 2} // small batches: paging is exercised
	res, err := x.Write(context.Background(), &buf, export.Request{Format: format, Filter: filter, Scope: s,
		Actor: "user:ann@example.com", RequestID: "req-1"})
	require.NoError(t, err)
	return buf.Bytes(), res
}

// ndjsonLines splits an NDJSON export into operation lines and the trailer (the signature
// line after it is left out).
func ndjsonLines(t *testing.T, out []byte) ([]map[string]json.RawMessage, export.Trailer) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	var sig export.Signature
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &sig))
	require.NotEmpty(t, sig.Signature, "the fixture's exports are signed")
	lines = lines[:len(lines)-1]
	var ops []map[string]json.RawMessage
	for _, line := range lines[:len(lines)-1] {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		ops = append(ops, m)
	}
	var tr export.Trailer
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &tr))
	return ops, tr
}

// csvRows parses a CSV export with encoding/csv into header, body rows and trailer row (the
// signature row after it is left out).
func csvRows(t *testing.T, out []byte) (header []string, body [][]string, trailer []string) {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(rows), 3)
	require.Equal(t, "#signature", rows[len(rows)-1][0])
	return rows[0], rows[1 : len(rows)-2], rows[len(rows)-2]
}

// beforeTrailer is an export's bytes before its trailer: what its digest covers.
func beforeTrailer(out []byte) []byte {
	ls := bytes.SplitAfter(out, []byte("\n"))
	return bytes.Join(ls[:len(ls)-3], nil) // the last element is the empty one after the final newline
}

func exportedIDs(t *testing.T, format export.Format, out []byte) []string {
	t.Helper()
	ids := []string{}
	if format == export.NDJSON {
		ops, _ := ndjsonLines(t, out)
		for _, op := range ops {
			var id string
			require.NoError(t, json.Unmarshal(op["id"], &id))
			ids = append(ids, id)
		}
		return ids
	}
	_, body, _ := csvRows(t, out)
	for _, r := range body {
		if len(ids) == 0 || ids[len(ids)-1] != r[0] {
			ids = append(ids, r[0])
		}
	}
	return ids
}

func TestExportHonoursFilters(t *testing.T) {
	all := models.AllTenants()
	cases := []struct {
		name   string
		scope  models.Scope
		filter export.Filter
		want   []string
	}{
		{"everything", all, export.Filter{}, []string{"acme-charge", "acme-ticket-pending", "acme-ticket-failed", "acme-legacy", "globex-charge"}},
		{"tenant", all, export.Filter{Tenant: "acme"}, []string{"acme-charge", "acme-ticket-pending", "acme-ticket-failed", "acme-legacy"}},
		{"scope of a limited user", models.OnlyTenants("globex"), export.Filter{}, []string{"globex-charge"}},
		{"tenant outside the scope", models.OnlyTenants("globex"), export.Filter{Tenant: "acme"}, nil},
		{"empty scope", models.OnlyTenants(), export.Filter{}, nil},
		{"zero scope", models.Scope{}, export.Filter{}, nil},
		{"from is inclusive", all, export.Filter{From: t0.Add(2 * time.Hour)}, []string{"acme-ticket-failed", "acme-legacy", "globex-charge"}},
		{"to is exclusive", all, export.Filter{To: t0.Add(2 * time.Hour)}, []string{"acme-charge", "acme-ticket-pending"}},
		{"time range", all, export.Filter{From: t0.Add(time.Hour), To: t0.Add(3 * time.Hour)}, []string{"acme-ticket-pending", "acme-ticket-failed"}},
		{"state", all, export.Filter{State: models.StateSucceeded}, []string{"acme-charge", "acme-legacy", "globex-charge"}},
		{"tool", all, export.Filter{Tool: "payments.charge"}, []string{"acme-charge", "globex-charge"}},
		{"all at once", models.OnlyTenants("acme"), export.Filter{State: models.StateSucceeded, Tool: "payments.charge",
			From: t0, To: t0.Add(time.Hour)}, []string{"acme-charge"}},
	}
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		f := newFixture(t, d)
		for _, tc := range cases {
			for _, format := range []export.Format{export.NDJSON, export.CSV} {
				t.Run(tc.name+"/"+string(format), func(t *testing.T) {
					out, res := f.runScopedExport(t, format, tc.scope, tc.filter)
					want := f.idsOf(tc.want...)
					assert.Equal(t, want, exportedIDs(t, format, out))
					assert.Equal(t, int64(len(want)), res.Operations)
					for _, other := range f.ids {
						if !contains(want, other) {
							assert.NotContains(t, string(out), other, "an operation outside the filter leaked")
						}
					}
					if format == export.CSV && !tc.scope.Unlimited() {
						_, body, _ := csvRows(t, out)
						for _, r := range body {
							assert.Contains(t, tc.scope.Tenants(), r[1])
						}
					}
				})
			}
		}
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestExportNeverShowsMaskedValues(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		f := newFixture(t, d)
		for _, format := range []export.Format{export.NDJSON, export.CSV} {
			t.Run(string(format), func(t *testing.T) {
				out, _ := f.runExport(t, format, export.Filter{})
				for _, secret := range []string{acmeCard, globexCard, legacyPass} {
					assert.NotContains(t, string(out), secret)
				}
				assert.Contains(t, string(out), "***", "the masked param is still there, as ***")
			})
		}
		t.Run("params of a tool no longer in the catalogue are withheld", func(t *testing.T) {
			out, _ := f.runExport(t, export.NDJSON, export.Filter{Tool: "legacy.tool"})
			ops, _ := ndjsonLines(t, out)
			require.Len(t, ops, 1)
			assert.JSONEq(t, "null", string(ops[0]["params"]))
		})
	})
}

func TestExportCSV(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		f := newFixture(t, d)
		out, res := f.runExport(t, export.CSV, export.Filter{Tenant: "acme"})
		header, body, trailer := csvRows(t, out)
		assert.Equal(t, []string{"operation_id", "tenant", "key", "tool", "state", "fingerprint", "workflow_run_id", "step_id",
			"params", "result", "error_class", "downstream_ref", "downstream_key", "justification",
			"event_id", "event_at", "event_type", "from_state", "to_state", "attempt", "actor", "detail"}, header)
		assert.Len(t, body, int(res.Events), "one row per event")

		t.Run("formula cells are neutralised", func(t *testing.T) {
			for _, r := range body {
				for i, cell := range r {
					if cell != "" {
						assert.NotContains(t, "=+-@\t\r", cell[:1], "row %v column %s", r[0], header[i])
					}
				}
			}
			charge := rowsOf(body, f.ids["acme-charge"])
			require.NotEmpty(t, charge)
			assert.Equal(t, "'"+formula, charge[0][2], "key")
			assert.Equal(t, "'+wf", charge[0][6])
			assert.Equal(t, "'@step", charge[0][7])
			assert.True(t, strings.HasPrefix(charge[0][8], "{"), "params stay a JSON object")
			assert.Contains(t, charge[0][8], `=HYPERLINK(\"http://x\",\"y\")`, "the param value is inside the JSON cell, not a cell of its own")
			assert.Contains(t, charge[0][8], `"card_number":"***"`)
			assert.Equal(t, `{"id":"R-1","note":"-1"}`, charge[0][9])
		})
		t.Run("downstream reference, key and justification", func(t *testing.T) {
			charge := rowsOf(body, f.ids["acme-charge"])
			require.NotEmpty(t, charge)
			op, err := f.l.Get(context.Background(), "acme", f.ids["acme-charge"])
			require.NoError(t, err)
			assert.Equal(t, "R-1", charge[0][11])
			assert.Equal(t, op.DownstreamKeySent(), charge[0][12])
			assert.NotEmpty(t, charge[0][12])
			assert.Equal(t, "refund requested, card ***", charge[0][13], "as recorded: masked when the operation was submitted")
			pending := rowsOf(body, f.ids["acme-ticket-pending"])
			require.NotEmpty(t, pending)
			assert.Empty(t, pending[0][11], "no reference before an attempt succeeded")
			assert.Equal(t, "'-because", pending[0][13], "a justification is a cell like any other: neutralised")
		})
		t.Run("events", func(t *testing.T) {
			failed := rowsOf(body, f.ids["acme-ticket-failed"])
			evs, err := f.l.Events(context.Background(), "acme", f.ids["acme-ticket-failed"])
			require.NoError(t, err)
			require.Len(t, failed, len(evs))
			for i, e := range evs {
				assert.Equal(t, e.Type, failed[i][16])
				assert.Equal(t, e.At.UTC().Format(time.RFC3339Nano), failed[i][15])
				assert.Equal(t, "rejected", failed[i][10])
			}
		})
		t.Run("trailer", func(t *testing.T) {
			require.Len(t, trailer, len(header))
			assert.Equal(t, "#chain_head", trailer[0])
			assert.Equal(t, res.Entry.Hash, trailer[2])
			assert.Equal(t, res.SHA256, trailer[3])
			sum := sha256.Sum256(beforeTrailer(out))
			assert.Equal(t, hex.EncodeToString(sum[:]), trailer[3], "the digest covers every byte before the trailer")
		})
	})
}

func rowsOf(body [][]string, id string) [][]string {
	var out [][]string
	for _, r := range body {
		if r[0] == id {
			out = append(out, r)
		}
	}
	return out
}

func TestExportNDJSON(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		f := newFixture(t, d)
		out, res := f.runExport(t, export.NDJSON, export.Filter{Tenant: "acme", From: t0})
		ops, tr := ndjsonLines(t, out)
		require.Len(t, ops, 4)

		t.Run("attempts", func(t *testing.T) {
			var charge []map[string]any
			require.NoError(t, json.Unmarshal(ops[0]["attempt_history"], &charge), "the first line is acme-charge")
			require.Len(t, charge, 1)
			assert.Regexp(t, `^att_`, charge[0]["id"], "the request id")
			assert.EqualValues(t, 1, charge[0]["number"])
			assert.EqualValues(t, 201, charge[0]["downstream_status"])
			assert.EqualValues(t, 42, charge[0]["latency_ms"])
			assert.Equal(t, "succeeded", charge[0]["class"])
			assert.Equal(t, "trace-acme-charge", charge[0]["trace_id"])
			assert.NotNil(t, charge[0]["finished_at"])
			assert.JSONEq(t, "[]", string(ops[1]["attempt_history"]), "a pending operation has none yet")
		})

		for _, line := range ops {
			var id string
			require.NoError(t, json.Unmarshal(line["id"], &id))
			op, err := f.l.Get(ctx, "acme", id)
			require.NoError(t, err)
			evs, err := f.l.Events(ctx, "acme", id)
			require.NoError(t, err)
			atts, err := f.l.Attempts(ctx, id)
			require.NoError(t, err)

			wantEvents := make([]opview.Event, 0, len(evs))
			for _, e := range evs {
				wantEvents = append(wantEvents, opview.RenderEvent(e))
			}
			wantAttempts := make([]opview.Attempt, 0, len(atts))
			for _, a := range atts {
				wantAttempts = append(wantAttempts, opview.RenderAttempt(a))
			}
			assert.JSONEq(t, mustJSON(t, wantEvents), string(line["events"]))
			assert.JSONEq(t, mustJSON(t, wantAttempts), string(line["attempt_history"]))
			delete(line, "events")
			delete(line, "attempt_history")
			assert.JSONEq(t, mustJSON(t, opview.Render(f.cat, op)), mustJSON(t, line), "the operation object as the API renders it")
		}
		t.Run("trailer", func(t *testing.T) {
			assert.Equal(t, export.ChainHead{Seq: res.Entry.Seq, Hash: res.Entry.Hash}, tr.ChainHead)
			seq, head, err := f.l.AuditHead(ctx)
			require.NoError(t, err)
			assert.Equal(t, export.ChainHead{Seq: seq, Hash: head}, tr.ChainHead, "the chain head the export was taken at")
			assert.JSONEq(t, `{"tenant":"acme","from":"2026-11-29T10:00:00Z"}`, string(tr.Filter))
			sum := sha256.Sum256(beforeTrailer(out))
			assert.Equal(t, hex.EncodeToString(sum[:]), tr.ExportSHA256)

			e, err := tr.AuditEntry.Entry()
			require.NoError(t, err)
			assert.Equal(t, e.Hash, e.ComputeHash(), "the entry recomputes offline")
			assert.Equal(t, "user:ann@example.com", e.Actor)
			assert.Equal(t, export.ActionCreated, e.Action)
			assert.Equal(t, "req-1", e.RequestID)
			assert.Equal(t, "acme", e.Tenant)
			assert.JSONEq(t, `{"filter":{"tenant":"acme","from":"2026-11-29T10:00:00Z"},"format":"ndjson","operations":4,"events":`+
				mustJSON(t, res.Events)+`,"export_sha256":"`+tr.ExportSHA256+`"}`, e.Detail)
			stored, err := f.l.AuditEntryAt(ctx, e.Seq)
			require.NoError(t, err)
			assert.Equal(t, stored.Hash, e.Hash, "the entry is the one in the chain")
			_, _, err = f.l.VerifyAudit(ctx)
			assert.NoError(t, err)
		})
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// failingWriter accepts limit bytes, then fails.
type failingWriter struct{ limit int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.limit {
		n := w.limit
		w.limit = 0
		return n, errors.New("connection reset")
	}
	w.limit -= len(p)
	return len(p), nil
}

func TestExportFailureIsAudited(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		f := newFixture(t, d)
		x := export.Exporter{Ledger: f.l, Catalog: f.cat}
		_, err := x.Write(ctx, &failingWriter{limit: 100}, export.Request{Format: export.NDJSON, Scope: models.AllTenants(), Actor: "cli"})
		require.ErrorContains(t, err, "connection reset")
		seq, _, err := f.l.AuditHead(ctx)
		require.NoError(t, err)
		e, err := f.l.AuditEntryAt(ctx, seq)
		require.NoError(t, err)
		assert.Equal(t, export.ActionCreated, e.Action)
		assert.Equal(t, "failed", e.Outcome)
		assert.Contains(t, e.Detail, "connection reset")
	})
}

func TestExportRefusesInvalidRequests(t *testing.T) {
	l := testdb.Ledger(t, models.SQLite)
	x := export.Exporter{Ledger: l}
	cases := map[string]export.Request{
		"unknown format": {Format: "xml"},
		"unknown state":  {Format: export.CSV, Filter: export.Filter{State: "DONE"}},
		"empty range":    {Format: export.CSV, Filter: export.Filter{From: t0, To: t0}},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			_, err := x.Write(context.Background(), &buf, req)
			require.Error(t, err)
			assert.Zero(t, buf.Len(), "nothing written")
		})
	}
	seq, _, err := l.AuditHead(context.Background())
	require.NoError(t, err)
	assert.Zero(t, seq, "a refused request is not an export")
}

// A person limited to one tenant finds their own export in the audit log they can read: an
// export without a tenant filter is recorded under their only tenant. An unlimited one's stays
// the gateway's (no tenant), and a filter's tenant is the entry's.
func TestExportAuditedWhereItsRequesterSeesIt(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		f := newFixture(t, d)
		for _, tc := range []struct {
			name   string
			scope  models.Scope
			filter export.Filter
			tenant string
		}{
			{"limited to one tenant", models.OnlyTenants("globex"), export.Filter{}, "globex"},
			{"a tenant's filter", models.AllTenants(), export.Filter{Tenant: "acme"}, "acme"},
			{"unlimited", models.AllTenants(), export.Filter{}, ""},
			{"limited to two tenants", models.OnlyTenants("acme", "globex"), export.Filter{}, ""},
		} {
			f.runScopedExport(t, export.NDJSON, tc.scope, tc.filter)
			entries, _, err := f.l.AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Action: export.ActionCreated, Limit: 1})
			require.NoError(t, err)
			require.Len(t, entries, 1)
			assert.Equal(t, tc.tenant, entries[0].Tenant, tc.name)
			if tc.tenant != "" {
				mine, _, err := f.l.AuditEntries(t.Context(), models.OnlyTenants(tc.tenant), models.AuditSearch{Action: export.ActionCreated, Limit: 1})
				require.NoError(t, err)
				require.Len(t, mine, 1, "%s: the requester's own scope shows the entry", tc.name)
				assert.Equal(t, entries[0].Seq, mine[0].Seq)
			}
		}
	})
}
