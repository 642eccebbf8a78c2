package export_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// seedAuditChain appends n entries to l's audit log directly, as a valid chain after what is
// there, in multi-row INSERTs within one transaction: the ledger's own Audit would take a
// transaction each, and GORM's reflection per row is most of the cost under -race.
func seedAuditChain(t *testing.T, l *models.Ledger, n int, detail string) {
	t.Helper()
	ctx := context.Background()
	seq, prev, err := l.AuditHead(ctx)
	require.NoError(t, err)
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const batch = 500
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", 11), ",") + ")"
	err = l.DB().Transaction(func(tx *gorm.DB) error {
		for done := 0; done < n; done += batch {
			var rows []string
			var args []any
			for i := 0; i < batch && done+i < n; i++ {
				seq++
				at = at.Add(time.Millisecond)
				e := models.AuditEntry{Seq: seq, At: at, Actor: "user:ann@example.com", Action: "review.approve", Tenant: "acme",
					OperationID: fmt.Sprintf("op_%08d", seq), Outcome: models.OutcomeOK, RequestID: fmt.Sprintf("req-%d", seq),
					Detail: detail, PrevHash: prev}
				e.Hash = e.ComputeHash()
				prev = e.Hash
				rows = append(rows, row)
				args = append(args, e.Seq, e.At, e.Actor, e.Action, e.Tenant, e.OperationID, e.Outcome, e.RequestID, e.Detail, e.PrevHash, e.Hash)
			}
			err := tx.Exec("INSERT INTO audit_log (seq, at, actor, action, tenant, operation_id, outcome, request_id, detail, prev_hash, hash) VALUES "+
				strings.Join(rows, ","), args...).Error
			if err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
}

// heapWriter discards what it is given and samples the heap in use as it goes: the peak of a
// streaming export stays near its buffers, whatever the number of entries.
type heapWriter struct {
	n, writes int64
	peak      uint64
}

func (w *heapWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	w.writes++
	if w.writes%8 == 1 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		w.peak = max(w.peak, ms.HeapInuse)
	}
	return len(p), nil
}

// TestAuditLogExportStreams exports 100,000 entries of about 600 bytes: some 60 MB go out,
// straight into the offline check (VerifyFile, which streams too) through a pipe, while the
// heap in use grows by less than a buffered export (which would hold the whole file, or every
// entry) could: it is sampled as the export writes. The file verifies whole, signature included.
//
// On SQLite under -race the test takes 20,000 entries: the race detector instruments the
// pure-Go SQLite engine, which then needs minutes for 100,000 on a shared CI machine. The
// exporter's code is the same on both engines, and PostgreSQL always takes the 100,000.
func TestAuditLogExportStreams(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		entries := 100_000
		if d == models.SQLite && raceEnabled {
			entries = 20_000
		}
		ctx := context.Background()
		f := newFixture(t, d)
		detail := `{"reason":"` + strings.Repeat("checked with the customer; ", 14) + `"}`
		seedAuditChain(t, f.l, entries, detail)
		x := export.Exporter{Ledger: f.l}

		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		pr, pw := io.Pipe()
		w := &heapWriter{}
		verified := make(chan error, 1)
		var v *export.Verified
		go func() {
			var err error
			v, err = export.VerifyFile(pr, &f.keys)
			_, _ = io.Copy(io.Discard, pr) // never leave the exporter blocked
			verified <- err
		}()
		res, err := x.WriteAuditLog(ctx, io.MultiWriter(w, pw), export.AuditRequest{Actor: models.ActorCLI})
		pw.CloseWithError(err)
		require.NoError(t, err)
		require.NoError(t, <-verified)
		t.Logf("%s: %d entries, %.1f MB written in %d writes; heap in use %.1f MiB before, peak %.1f MiB",
			d, res.Entries, float64(w.n)/1e6, w.writes, mib(before.HeapInuse), mib(w.peak))
		require.Greater(t, res.Entries, int64(entries))
		require.Greater(t, w.n, int64(entries)*800, "the entries are as large as seeded")
		// A buffered export holds at least the file; a streamed one, its buffers and a page.
		bound := min(uint64(32<<20), uint64(w.n)/2)
		assert.Less(t, w.peak, before.HeapInuse+bound,
			"the heap grows by less than %.1f MiB while %.1f MB are written and checked: entries are streamed, not held", mib(bound), float64(w.n)/1e6)
		assert.Greater(t, w.writes, int64(100), "written as it is read, in many writes, not at the end")
		assert.True(t, v.AuditLog)
		assert.Equal(t, res.Entries, v.Entries)
		assert.Equal(t, f.keys.Keys[0].KeyID, v.KeyID)
	})
}

// TestAuditLogExportRange: --from and --to select an unbroken piece of the chain, whose first
// entry links to one outside the file, and the export records what it holds.
func TestAuditLogExportRange(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		f := newFixture(t, d)
		seq0, _, err := f.l.AuditHead(ctx)
		require.NoError(t, err)
		seedAuditChain(t, f.l, 10, `{}`)
		from := time.Date(2026, 12, 1, 0, 0, 0, 3*int(time.Millisecond), time.UTC) // entries seq0+3 …
		to := from.Add(4 * time.Millisecond)                                       // … to seq0+6
		var buf bytes.Buffer
		x := export.Exporter{Ledger: f.l, BatchSize: 3} // pages of 3: paging is exercised
		res, err := x.WriteAuditLog(ctx, &buf, export.AuditRequest{From: from, To: to, Actor: "cli", RequestID: "req-9"})
		require.NoError(t, err)
		assert.Equal(t, int64(4), res.Entries)
		lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		require.Len(t, lines, 6)
		var first models.AuditRecord
		require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
		assert.Equal(t, fmt.Sprint(seq0+3), first.EventID)
		require.NotNil(t, first.PreviousHash, "links to the entry before the range")
		e, err := res.Entry.Record().Entry()
		require.NoError(t, err)
		assert.Equal(t, export.ActionAuditExported, e.Action)
		assert.JSONEq(t, fmt.Sprintf(`{"filter":{"from":"2026-12-01T00:00:00.003Z","to":"2026-12-01T00:00:00.007Z"},"format":"ndjson",`+
			`"entries":4,"first_seq":%d,"last_seq":%d,"export_sha256":%q}`, seq0+3, seq0+6, res.SHA256), e.Detail)
		_, err = export.VerifyFile(bytes.NewReader(buf.Bytes()), &f.keys)
		require.NoError(t, err)
		_, err = x.WriteAuditLog(ctx, io.Discard, export.AuditRequest{From: to, To: from})
		require.ErrorContains(t, err, "the time range is empty")
	})
}
