package export

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/models"
)

// csvHeader names the columns: the operation's, then the event's. One row per event.
var csvHeader = []string{
	"operation_id", "tenant", "key", "tool", "state", "fingerprint", "workflow_run_id", "step_id",
	"params", "result", "error_class", "downstream_ref", "downstream_key", "justification",
	"event_id", "event_at", "event_type", "from_state", "to_state", "attempt", "actor", "detail",
}

// csvTrailerTag starts the trailer row, which carries the chain head, the digest, the audit
// entry (as JSON) and the signing key's id in its first cells and is padded to the header's
// width; csvSignatureTag starts the last row: the key id and the trailer row's signature.
const (
	csvTrailerTag   = "#chain_head"
	csvSignatureTag = "#signature"
)

// The columns of the event's cells: the operation's come before.
const csvEvent = 14

// csvBody writes one row per event. An operation without events (none should exist) still gets
// one row, with empty event cells, so that no operation goes missing from the file.
type csvBody struct {
	w   *csv.Writer
	row []string
}

func newCSVBody(w io.Writer) (*csvBody, error) {
	c := &csvBody{w: csv.NewWriter(w), row: make([]string, len(csvHeader))}
	if err := c.w.Write(csvHeader); err != nil {
		return nil, fmt.Errorf("export: csv header: %w", err)
	}
	return c, nil
}

func (c *csvBody) operation(eo models.ExportedOperation, v opview.Operation) (int, error) {
	r := c.row
	r[0], r[1], r[2], r[3], r[4], r[5] = v.ID, eo.Op.Tenant, v.Key, v.Tool, string(v.State), v.Fingerprint
	r[6], r[7] = deref(v.WorkflowRunID), deref(v.StepID)
	r[8], r[9], r[10] = rawCell(v.Params), rawCell(v.Result), ""
	if v.Error != nil {
		r[10] = v.Error.Class
	}
	r[11], r[12], r[13] = deref(v.DownstreamRef), v.DownstreamKey, deref(v.Justification)
	if len(eo.Events) == 0 {
		clear(r[csvEvent:])
		return 0, c.write()
	}
	for _, e := range eo.Events {
		ev := r[csvEvent:]
		ev[0], ev[1], ev[2] = strconv.FormatInt(e.ID, 10), e.At.UTC().Format(time.RFC3339Nano), e.Type
		ev[3], ev[4], ev[5] = stateCell(e.FromState), stateCell(e.ToState), ""
		if e.Attempt != nil {
			ev[5] = strconv.Itoa(*e.Attempt)
		}
		ev[6], ev[7] = e.Actor, deref(e.Detail)
		if err := c.write(); err != nil {
			return 0, err
		}
	}
	return len(eo.Events), nil
}

// write neutralises the row against formula injection and writes it.
func (c *csvBody) write() error {
	for i, s := range c.row {
		c.row[i] = neutralize(s)
	}
	if err := c.w.Write(c.row); err != nil {
		return fmt.Errorf("export: csv row: %w", err)
	}
	return nil
}

func (c *csvBody) close() error {
	c.w.Flush()
	if err := c.w.Error(); err != nil {
		return fmt.Errorf("export: write csv: %w", err)
	}
	return nil
}

// trailer returns the trailer row, outside the digest.
func (c *csvBody) trailer(t Trailer) ([]byte, error) {
	entry, err := json.Marshal(t.AuditEntry)
	if err != nil {
		return nil, fmt.Errorf("export: csv trailer: %w", err)
	}
	return csvLine(csvTrailerTag, strconv.FormatInt(t.ChainHead.Seq, 10), t.ChainHead.Hash, t.ExportSHA256, string(entry), t.KeyID)
}

// signature returns the signature row.
func (c *csvBody) signature(s Signature) ([]byte, error) {
	return csvLine(csvSignatureTag, s.KeyID, s.Signature)
}

// csvLine returns one row of cells, padded to the header's width.
func csvLine(cells ...string) ([]byte, error) {
	row := make([]string, len(csvHeader))
	copy(row, cells)
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	if err := cw.Write(row); err != nil {
		return nil, fmt.Errorf("export: csv %s row: %w", cells[0], err)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return nil, fmt.Errorf("export: csv %s row: %w", cells[0], err)
	}
	return b.Bytes(), nil
}

// neutralize keeps a spreadsheet from reading a cell as a formula (CSV injection): a cell that
// starts with =, +, -, @, a tab or a carriage return gets a leading apostrophe, which
// spreadsheets show as text and do not evaluate.
func neutralize(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

// rawCell writes a JSON value as text; null is an empty cell.
func rawCell(v json.RawMessage) string {
	if v == nil || string(v) == "null" {
		return ""
	}
	return string(v)
}

func stateCell(s *models.State) string {
	if s == nil {
		return ""
	}
	return string(*s)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
