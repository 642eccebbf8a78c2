package export

import (
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
	"params", "result", "error_class",
	"event_id", "event_at", "event_type", "from_state", "to_state", "attempt", "actor", "detail",
}

// csvTrailerTag starts the trailer row, which carries the chain head, the digest and the audit
// entry (as JSON) in its first cells and is padded to the header's width.
const csvTrailerTag = "#chain_head"

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
	if len(eo.Events) == 0 {
		clear(r[11:])
		return 0, c.write()
	}
	for _, e := range eo.Events {
		r[11], r[12], r[13] = strconv.FormatInt(e.ID, 10), e.At.UTC().Format(time.RFC3339Nano), e.Type
		r[14], r[15], r[16] = stateCell(e.FromState), stateCell(e.ToState), ""
		if e.Attempt != nil {
			r[16] = strconv.Itoa(*e.Attempt)
		}
		r[17], r[18] = e.Actor, deref(e.Detail)
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

// trailer writes the trailer row to w, outside the digest.
func (c *csvBody) trailer(w io.Writer, t Trailer) error {
	return writeCSVTrailer(w, t)
}

func writeCSVTrailer(w io.Writer, t Trailer) error {
	entry, err := json.Marshal(t.AuditEntry)
	if err != nil {
		return fmt.Errorf("export: csv trailer: %w", err)
	}
	row := make([]string, len(csvHeader))
	row[0], row[1], row[2] = csvTrailerTag, strconv.FormatInt(t.ChainHead.Seq, 10), t.ChainHead.Hash
	row[3], row[4] = t.ExportSHA256, string(entry)
	cw := csv.NewWriter(w)
	if err := cw.Write(row); err != nil {
		return fmt.Errorf("export: csv trailer: %w", err)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("export: csv trailer: %w", err)
	}
	return nil
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
