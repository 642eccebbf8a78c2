package export

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/idemgate/idemgate/models"
)

// ActionAuditExported is the audit action of an export of the audit log itself.
const ActionAuditExported = "audit.exported"

// DefaultAuditBatchSize is how many audit entries are read per query.
const DefaultAuditBatchSize = 1000

// AuditRequest says which part of the audit log to export, and on whose behalf. The whole log
// spans every tenant: only the command line exports it.
type AuditRequest struct {
	// From and To bound the entries' times: From inclusive, To exclusive; zero does not bound.
	// The export holds every entry from the first in range to the last, so that it is one
	// unbroken piece of the chain (models.Ledger.AuditSeqRange).
	From, To  time.Time
	Actor     string
	RequestID string
}

// auditFilter is the filter of an audit log export as its audit entry and trailer record it.
type auditFilter struct {
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
}

// WriteAuditLog streams the audit entries req asks for to w, one record per line in the wire
// form (models.AuditRecord) that is hashed, reading them in pages by sequence number so memory
// stays constant; then appends its own audit.exported entry and ends, as every export does,
// with the trailer and its signature. The result's Operations and Events are 0; Entries counts
// the lines.
func (x *Exporter) WriteAuditLog(ctx context.Context, w io.Writer, req AuditRequest) (Result, error) {
	// The recorded filter is the one applied: UTC, at the ledger's precision (as Filter does).
	n := Filter{From: req.From, To: req.To}.normalized()
	f := auditFilter{From: n.From, To: n.To}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return Result{}, fmt.Errorf("export: the time range is empty: from %s is not before to %s",
			f.From.Format(time.RFC3339), f.To.Format(time.RFC3339))
	}
	filter, err := json.Marshal(f)
	if err != nil {
		return Result{}, fmt.Errorf("export: encode filter: %w", err)
	}
	if err := x.signingReady(ctx); err != nil {
		return Result{}, err
	}
	first, last, err := x.Ledger.AuditSeqRange(ctx, f.From, f.To)
	if err != nil {
		return Result{}, fmt.Errorf("export: %w", err)
	}
	out := bufio.NewWriterSize(w, 64<<10)
	digest := sha256.New()
	b := newNDJSONBody(io.MultiWriter(out, digest))
	b.enc.SetEscapeHTML(false)
	res, err := x.writeAuditEntries(ctx, b, first, last)
	if err == nil {
		err = b.close()
	}
	if err == nil {
		if err = out.Flush(); err != nil {
			err = fmt.Errorf("export: write: %w", err)
		}
	}
	res.SHA256 = hex.EncodeToString(digest.Sum(nil))
	d := map[string]any{"filter": json.RawMessage(filter), "format": NDJSON, "entries": res.Entries,
		"first_seq": first, "last_seq": last, "export_sha256": res.SHA256}
	in := models.AuditInput{Actor: req.Actor, Action: ActionAuditExported, Outcome: models.OutcomeOK, RequestID: req.RequestID, Detail: d}
	if err != nil {
		_ = out.Flush()
		in.Outcome, d["error"] = models.OutcomeFailed, err.Error()
		if _, aerr := x.Ledger.Audit(context.WithoutCancel(ctx), in); aerr != nil {
			return res, fmt.Errorf("%w; and the failed export could not be recorded in the audit log: %w", err, aerr)
		}
		return res, err
	}
	if res.Entry, err = x.Ledger.Audit(ctx, in); err != nil {
		return res, fmt.Errorf("export: anchor in the audit log: %w", err)
	}
	return res, x.finish(ctx, out, b, filter, res)
}

// writeAuditEntries writes the entries first to last, page by page.
func (x *Exporter) writeAuditEntries(ctx context.Context, b *ndjsonBody, first, last int64) (Result, error) {
	size := x.BatchSize
	if size <= 0 {
		size = DefaultAuditBatchSize
	}
	var res Result
	if first == 0 {
		return res, nil
	}
	for after := first - 1; after < last; {
		page, err := x.Ledger.AuditPage(ctx, after, last, size)
		if err != nil {
			return res, fmt.Errorf("export: %w", err)
		}
		if len(page) == 0 {
			return res, fmt.Errorf("export: audit entries %d to %d are missing", after+1, last)
		}
		for i := range page {
			if err := b.enc.Encode(page[i].Record()); err != nil {
				return res, fmt.Errorf("export: audit entry %d: %w", page[i].Seq, err)
			}
			res.Entries++
		}
		after = page[len(page)-1].Seq
	}
	return res, nil
}
