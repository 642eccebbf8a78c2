// Package opview holds the public JSON shape of an operation, its events and its attempts
// (docs/API.md): the one rendering shared by the agent API and the exports, so that an exported
// operation reads exactly as the API answers it, masked the same way.
package opview

import (
	"encoding/json"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// Operation is the operation object of docs/API.md, members in the documented order.
type Operation struct {
	ID            string          `json:"id"`
	Key           string          `json:"key"`
	Tool          string          `json:"tool"`
	State         models.State    `json:"state"`
	Fingerprint   string          `json:"fingerprint"`
	Params        json.RawMessage `json:"params"`
	Result        json.RawMessage `json:"result"`
	Error         *Error          `json:"error"`
	DownstreamRef *string         `json:"downstream_ref"`
	DownstreamKey string          `json:"downstream_key"`
	Attempts      int             `json:"attempts"`
	NextAttemptAt *time.Time      `json:"next_attempt_at"`
	Review        *Review         `json:"review"`
	Compensates   *string         `json:"compensates"`
	CompensatedBy *string         `json:"compensated_by"`
	WorkflowRunID *string         `json:"workflow_run_id"`
	StepID        *string         `json:"step_id"`
	Justification *string         `json:"justification"`
	// Policy is what the tools file's policies and budgets decided when the operation was
	// recorded (docs/POLICY.md); null when none applied. Render shows the operation's, when
	// the ledger attached it (a new operation, a webhook's payload); the API reads it apart
	// (models.Ledger.PolicyOf) for the tools a policy applies to.
	Policy      *models.PolicyDecision `json:"policy"`
	CreatedAt   time.Time              `json:"created_at"`
	UpdatedAt   time.Time              `json:"updated_at"`
	CompletedAt *time.Time             `json:"completed_at"`
}

// Review is the operation's current review, when it has one.
type Review struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason"`
}

// Error is why an operation failed or is uncertain.
type Error struct {
	Class            string `json:"class"`
	Message          string `json:"message"`
	DownstreamStatus *int   `json:"downstream_status"`
}

// jsonNull is the value of params, result and detail when there are none.
var jsonNull = json.RawMessage("null")

// Render builds the public view of op, the one every representation of an operation shows:
// the API, MCP, webhook payloads, exports and the console. Its params are masked with the
// tool's rules; what came back from the downstream (result, error message) was scrubbed of
// the call's sensitive values before it was recorded (jobs.scrubbed), so it is shown as
// recorded. When the tool is no longer in the catalogue its masking rules are unknown, so
// params are withheld entirely (null) rather than risk showing a secret; params that cannot
// be parsed are withheld for the same reason.
func Render(cat *catalog.Catalog, op *models.Operation) Operation {
	return render(cat, op, (*catalog.Tool).MaskCanonical)
}

// RenderForPeople is Render for a person: the console and exports, where a sensitive param
// shows the safe form its tool declares ("•••• 4242", docs/TOOLS.md) instead of "***".
func RenderForPeople(cat *catalog.Catalog, op *models.Operation) Operation {
	return render(cat, op, (*catalog.Tool).RevealCanonical)
}

func render(cat *catalog.Catalog, op *models.Operation, mask func(*catalog.Tool, []byte) ([]byte, error)) Operation {
	out := Operation{
		ID: op.ID, Key: op.Key, Tool: op.Tool, State: op.State, Fingerprint: op.Fingerprint,
		Params: jsonNull, Result: jsonNull, DownstreamRef: op.DownstreamRef, DownstreamKey: op.DownstreamKeySent(), Attempts: op.Attempts,
		NextAttemptAt: utc(op.NextAttemptAt), Compensates: op.Compensates, CompensatedBy: op.CompensatedBy,
		WorkflowRunID: op.WorkflowRunID, StepID: op.StepID, Justification: op.Justification, Policy: op.Policy,
		CreatedAt: op.CreatedAt.UTC(), UpdatedAt: op.UpdatedAt.UTC(), CompletedAt: utc(op.CompletedAt),
	}
	if op.Params != nil {
		if tool, ok := cat.Get(op.Tool); ok {
			if masked, err := mask(tool, []byte(*op.Params)); err == nil {
				out.Params = masked
			}
		}
	}
	if op.Result != nil {
		out.Result = json.RawMessage(*op.Result)
	}
	if op.Review != nil {
		out.Review = &Review{ID: op.Review.ID, Status: op.Review.Status, Reason: op.Review.Reason}
	}
	if op.ErrorClass != nil {
		out.Error = &Error{Class: *op.ErrorClass, DownstreamStatus: op.DownstreamStatus}
		if op.ErrorMessage != nil {
			out.Error.Message = *op.ErrorMessage
		}
	}
	return out
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
