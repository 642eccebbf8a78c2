// Package export writes operation histories for auditors (docs/AUDIT.md): CSV (one row per event) or
// NDJSON (one operation per line with its events and attempts), streamed from the ledger in
// batches so memory stays constant however large the export. Every export is anchored in the
// audit chain: it appends an export.created entry recording the filter, the counts and the
// SHA-256 of the bytes written, and ends with a trailer carrying that entry and a line with the
// trailer's Ed25519 signature by the audit signing key, so the file can be checked offline
// (VerifyFile, or sha256sum and openssl as docs/AUDIT.md shows) and against the live chain.
package export

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// Format is an export's file format.
type Format string

// The formats.
const (
	CSV    Format = "csv"
	NDJSON Format = "ndjson"
)

// ParseFormat returns the format named s.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case CSV, NDJSON:
		return f, nil
	}
	return "", fmt.Errorf("export: unknown format %q (want csv or ndjson)", s)
}

// ContentType is the media type to serve an export of this format with.
func (f Format) ContentType() string {
	if f == CSV {
		return "text/csv; charset=utf-8"
	}
	return "application/x-ndjson"
}

// ActionCreated is the audit action of an export. A finished export's entry has outcome ok; an
// export that failed after it started reading has one with outcome failed, since part of the
// data may have left.
const ActionCreated = "export.created"

// DefaultBatchSize is how many operations are read per query.
const DefaultBatchSize = 500

// Exporter writes operation histories from a ledger, masking params with the catalogue's rules.
type Exporter struct {
	Ledger  *models.Ledger
	Catalog *catalog.Catalog
	// BatchSize is how many operations each read fetches; 0 means DefaultBatchSize.
	BatchSize int
}

// Request says what to export and on whose behalf.
type Request struct {
	Format Format
	Filter Filter
	// Scope is the part of the ledger the requester may see: the console user's, or every
	// tenant from the command line. The zero Scope exports nothing.
	Scope models.Scope
	// Actor is recorded in the audit entry: user:<email> from the console, cli from the
	// command line.
	Actor     string
	RequestID string
}

// Result describes a finished export.
type Result struct {
	Operations int64
	Events     int64
	// Entries is the number of audit entries of an audit log export (WriteAuditLog).
	Entries int64
	// SHA256 is the hex SHA-256 of every byte written before the trailer.
	SHA256 string
	// Entry is the export's audit entry, which the trailer carries.
	Entry *models.AuditEntry
}

// body is the format-specific writer of an export's operations and trailer.
type body interface {
	// operation writes one operation with its timeline and returns how many events it wrote.
	operation(eo models.ExportedOperation, v opview.Operation) (int, error)
	// close flushes everything the digest covers.
	close() error
	// trailer and signature return the last two lines, outside the digest.
	trailer(t Trailer) ([]byte, error)
	signature(s Signature) ([]byte, error)
}

// Write streams the export req asks for to w, appends its audit entry, and ends with the
// trailer. Nothing is written for an invalid request. When the export fails after it started,
// the returned error says so and an audit entry with outcome failed records the attempt; w then
// holds a truncated export without trailer, which VerifyFile rejects.
func (x *Exporter) Write(ctx context.Context, w io.Writer, req Request) (Result, error) {
	req.Filter = req.Filter.normalized()
	if err := req.Filter.validate(); err != nil {
		return Result{}, err
	}
	if _, err := ParseFormat(string(req.Format)); err != nil {
		return Result{}, err
	}
	filter, err := req.Filter.record(req.Scope)
	if err != nil {
		return Result{}, fmt.Errorf("export: encode filter: %w", err)
	}
	if err := x.signingReady(ctx); err != nil {
		return Result{}, err
	}
	out := bufio.NewWriterSize(w, 64<<10)
	digest := sha256.New()
	b, err := newBody(req.Format, io.MultiWriter(out, digest))
	if err != nil {
		return Result{}, err
	}
	res, err := x.writeBody(ctx, b, req.Scope, req.Filter)
	if err == nil {
		err = b.close()
	}
	if err == nil {
		// The body reaches w before the entry is appended: an entry with outcome ok means the
		// reader was handed every byte it vouches for.
		if err = out.Flush(); err != nil {
			err = fmt.Errorf("export: write: %w", err)
		}
	}
	res.SHA256 = hex.EncodeToString(digest.Sum(nil))
	if err != nil {
		_ = out.Flush() // what was produced is the caller's; the missing trailer marks it incomplete
		return res, x.auditFailure(ctx, req, filter, res, err)
	}
	res.Entry, err = x.Ledger.Audit(ctx, x.auditInput(req, filter, res, "ok", ""))
	if err != nil {
		return res, fmt.Errorf("export: anchor in the audit log: %w", err)
	}
	return res, x.finish(ctx, out, b, filter, res)
}

// signingReady refuses, before anything is written, an export that could not be signed
// although the ledger has a signing key. A ledger without one exports unsigned.
func (x *Exporter) signingReady(ctx context.Context) error {
	err := x.Ledger.AuditSigningReady(ctx)
	if err != nil && models.ErrorCode(err) != models.CodeNotFound {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// finish writes the trailer and its signature, by the key valid when the export's audit
// entry was made (a rotation meanwhile does not matter), and flushes.
func (x *Exporter) finish(ctx context.Context, out *bufio.Writer, b body, filter json.RawMessage, res Result) error {
	signer, err := x.Ledger.AuditSigner(ctx, res.Entry.At)
	if err != nil && models.ErrorCode(err) != models.CodeNotFound {
		return fmt.Errorf("export: sign: %w", err)
	}
	var sig Signature
	if signer != nil {
		sig.KeyID = signer.KeyID()
	}
	line, err := b.trailer(newTrailer(filter, res.SHA256, res.Entry, sig.KeyID))
	if err != nil {
		return err
	}
	if signer != nil {
		sig.Signature = base64.StdEncoding.EncodeToString(signer.Sign(line))
	}
	last, err := b.signature(sig)
	if err != nil {
		return err
	}
	_, _ = out.Write(line)
	_, _ = out.Write(last)
	if err := out.Flush(); err != nil {
		return fmt.Errorf("export: write: %w", err)
	}
	return nil
}

func newBody(f Format, w io.Writer) (body, error) {
	if f == CSV {
		return newCSVBody(w)
	}
	return newNDJSONBody(w), nil
}

// writeBody pages through the matching operations by id and writes each one.
func (x *Exporter) writeBody(ctx context.Context, b body, s models.Scope, f Filter) (Result, error) {
	size := x.BatchSize
	if size <= 0 {
		size = DefaultBatchSize
	}
	var res Result
	after := ""
	for {
		batch, err := x.Ledger.ExportBatch(ctx, s, f.ledger(), after, size)
		if err != nil {
			return res, fmt.Errorf("export: read operations: %w", err)
		}
		for _, eo := range batch {
			n, err := b.operation(eo, opview.RenderForPeople(x.Catalog, eo.Op))
			if err != nil {
				return res, err
			}
			res.Operations++
			res.Events += int64(n)
		}
		if len(batch) < size {
			return res, nil
		}
		after = batch[len(batch)-1].Op.ID
	}
}

func (x *Exporter) auditInput(req Request, filter json.RawMessage, res Result, outcome, failure string) models.AuditInput {
	d := map[string]any{"filter": filter, "format": req.Format, "operations": res.Operations,
		"events": res.Events, "export_sha256": res.SHA256}
	if failure != "" {
		d["error"] = failure
	}
	return models.AuditInput{Actor: req.Actor, Action: ActionCreated, Tenant: req.auditTenant(), Outcome: outcome,
		RequestID: req.RequestID, Detail: d}
}

// auditTenant is the tenant the export's audit entry is recorded under: the filter's, or the
// requester's only tenant when the filter names none (a user limited to one tenant exported
// all they see). A person limited to tenants sees only their tenants' entries, so this is what
// lets them find their own export in the audit log.
func (req Request) auditTenant() string {
	if req.Filter.Tenant != "" {
		return req.Filter.Tenant
	}
	if t := req.Scope.Tenants(); len(t) == 1 {
		return t[0]
	}
	return ""
}

// auditFailure records an export that broke off. It is recorded even when ctx was cancelled
// (a client that went away is the common cause), since part of the data may have left.
func (x *Exporter) auditFailure(ctx context.Context, req Request, filter json.RawMessage, res Result, cause error) error {
	_, err := x.Ledger.Audit(context.WithoutCancel(ctx), x.auditInput(req, filter, res, "failed", cause.Error()))
	if err != nil {
		return errors.Join(cause, fmt.Errorf("export: record the failed export in the audit log: %w", err))
	}
	return cause
}
