package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/idemgate/idemgate/handlers/problems"
)

// PostgreSQL cannot store the NUL character in text, nor read "\u0000" out of JSON: a value
// holding one fails the statement, which answers 503 ledger-unavailable, logs an error and
// can set off the alert on demand; SQLite would take it. So input holding NUL is refused
// with 400 before it reaches the ledger, on both engines alike.

// refuseNULCall refuses a call whose params, workflow run or step hold NUL.
func refuseNULCall(req operationRequest) error {
	switch {
	case strings.ContainsRune(req.WorkflowRunID, 0):
		return problem(problems.MalformedBody, "workflow_run_id contains the NUL character, which the ledger cannot store")
	case strings.ContainsRune(req.StepID, 0):
		return problem(problems.MalformedBody, "step_id contains the NUL character, which the ledger cannot store")
	case strings.ContainsRune(req.Justification, 0):
		return problem(problems.MalformedBody, "justification contains the NUL character, which the ledger cannot store")
	case jsonHasNUL(req.Params):
		return problem(problems.MalformedBody, "params contain the NUL character (\\u0000), which the ledger cannot store")
	}
	return nil
}

// jsonHasNUL reports whether a string or member name of the JSON document raw holds NUL. A
// document without the escape at all (almost every one) is not decoded.
func jsonHasNUL(raw []byte) bool {
	if !bytes.Contains(raw, []byte(`\u0000`)) && bytes.IndexByte(raw, 0) < 0 {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return true // not ours to read: refuse rather than pass it on
		}
		if s, ok := tok.(string); ok && strings.ContainsRune(s, 0) {
			return true
		}
	}
}
