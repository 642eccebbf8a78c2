package export

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/models"
)

// ndjsonLine is one operation of an NDJSON export: the operation object exactly as the API
// renders it, followed by its events (in the API's event shape) and its attempts. The attempts
// are under attempt_history because the operation object's own "attempts" member is the count
// (docs/API.md), which an export must not change.
type ndjsonLine struct {
	opview.Operation
	Events         []opview.Event   `json:"events"`
	AttemptHistory []opview.Attempt `json:"attempt_history"`
}

// ndjsonBody writes one JSON object per line.
type ndjsonBody struct {
	w    *bufio.Writer
	enc  *json.Encoder
	line ndjsonLine
}

func newNDJSONBody(w io.Writer) *ndjsonBody {
	bw := bufio.NewWriter(w)
	// Empty, not nil, lists: an operation without attempts has "attempt_history": [].
	return &ndjsonBody{w: bw, enc: json.NewEncoder(bw),
		line: ndjsonLine{Events: []opview.Event{}, AttemptHistory: []opview.Attempt{}}}
}

func (n *ndjsonBody) operation(eo models.ExportedOperation, v opview.Operation) (int, error) {
	l := &n.line
	l.Operation = v
	l.Events, l.AttemptHistory = l.Events[:0], l.AttemptHistory[:0]
	for _, e := range eo.Events {
		l.Events = append(l.Events, opview.RenderEvent(e))
	}
	for _, a := range eo.Attempts {
		l.AttemptHistory = append(l.AttemptHistory, opview.RenderAttempt(a))
	}
	if err := n.enc.Encode(l); err != nil {
		return 0, fmt.Errorf("export: operation %s: %w", v.ID, err)
	}
	return len(eo.Events), nil
}

func (n *ndjsonBody) close() error {
	if err := n.w.Flush(); err != nil {
		return fmt.Errorf("export: write ndjson: %w", err)
	}
	return nil
}

// trailer returns the trailer line, newline included.
func (n *ndjsonBody) trailer(t Trailer) ([]byte, error) { return encodeTrailer(t) }

// signature returns the signature line, newline included.
func (n *ndjsonBody) signature(s Signature) ([]byte, error) { return encodeLine(s) }

// encodeTrailer is the one byte form of an NDJSON trailer line, newline included; the offline
// check compares a file's trailer with it, so that no edit of the trailer goes unnoticed.
func encodeTrailer(t Trailer) ([]byte, error) { return encodeLine(t) }

func encodeLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("export: ndjson %T: %w", v, err)
	}
	return append(b, '\n'), nil
}
