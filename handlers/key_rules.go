package handlers

import (
	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
)

// Two rules about operation keys that POST /v1/operations, MCP tools/call and the compensate
// endpoint share (docs/API.md).

// reservedKey refuses a key of the gateway's own: keys beginning with "compensate:" name the
// compensations it records, so an agent that took one could occupy the key of a compensation
// a reviewer has yet to propose. Nothing is recorded or run. The key itself is not repeated.
func reservedKey(key string) error {
	if !jobs.ReservedKey(key) {
		return nil
	}
	return problem(problems.IdempotencyKeyReserved, "keys beginning with %q are the gateway's own, for the compensations "+
		"it records; choose another key for this action (to undo an operation, use POST /v1/operations/{id}/compensate)",
		jobs.CompensationKeyPrefix)
}

// hideForeignOperation answers a known key whose operation's tool the caller may not use
// without anything of that operation: its id, state and tool stay unknown to the caller, who
// learns only that the key is taken. The operation stays on the error (Err) for logs and the
// audit log. Any other error is returned as it is.
func hideForeignOperation(caller *models.Caller, err error) error {
	op := models.ErrorOperation(err)
	if op == nil || caller.AllowsTool(op.Tool) {
		return err
	}
	switch models.ErrorCode(err) {
	case models.CodeKeyMismatch:
		return &Problem{Slug: problems.IdempotencyKeyMismatch, Err: err,
			Detail: "this Idempotency-Key is already taken in your tenant; nothing was run. Use another key for this action"}
	case models.CodeKeyExpired:
		return &Problem{Slug: problems.IdempotencyKeyExpired, Err: err,
			Detail: "this Idempotency-Key was taken and its record passed its retention; nothing was run. Use another key for this action"}
	}
	return err
}
