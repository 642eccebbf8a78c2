package handlers

import (
	"encoding/json"
	"time"

	"github.com/idemgate/idemgate/catalog"
	"github.com/idemgate/idemgate/models"
)

// operationJSON is the operation object of SPEC §5, members in the documented order.
type operationJSON struct {
	ID            string          `json:"id"`
	Key           string          `json:"key"`
	Tool          string          `json:"tool"`
	State         models.State    `json:"state"`
	Fingerprint   string          `json:"fingerprint"`
	Params        json.RawMessage `json:"params"`
	Result        json.RawMessage `json:"result"`
	Error         *errorJSON      `json:"error"`
	DownstreamRef *string         `json:"downstream_ref"`
	Attempts      int             `json:"attempts"`
	NextAttemptAt *time.Time      `json:"next_attempt_at"`
	Review        any             `json:"review"`
	Compensates   *string         `json:"compensates"`
	CompensatedBy *string         `json:"compensated_by"`
	WorkflowRunID *string         `json:"workflow_run_id"`
	StepID        *string         `json:"step_id"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	CompletedAt   *time.Time      `json:"completed_at"`
}

type reviewJSON struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason"`
}

type errorJSON struct {
	Class            string `json:"class"`
	Message          string `json:"message"`
	DownstreamStatus *int   `json:"downstream_status"`
}

var jsonNull = json.RawMessage("null")

// renderOperation builds the public view of op: sensitive params masked with the tool's
// rules; when the tool is no longer in the catalogue its masking rules are unknown, so params
// are withheld entirely rather than risk showing a secret.
func renderOperation(cat *catalog.Catalog, op *models.Operation) operationJSON {
	out := operationJSON{
		ID: op.ID, Key: op.Key, Tool: op.Tool, State: op.State, Fingerprint: op.Fingerprint,
		Params: jsonNull, Result: jsonNull, DownstreamRef: op.DownstreamRef, Attempts: op.Attempts,
		NextAttemptAt: utc(op.NextAttemptAt), Compensates: op.Compensates, CompensatedBy: op.CompensatedBy,
		WorkflowRunID: op.WorkflowRunID, StepID: op.StepID,
		CreatedAt: op.CreatedAt.UTC(), UpdatedAt: op.UpdatedAt.UTC(), CompletedAt: utc(op.CompletedAt),
	}
	if op.Params != nil {
		if tool, ok := cat.Get(op.Tool); ok {
			if masked, err := tool.MaskJSON([]byte(*op.Params)); err == nil {
				out.Params = masked
			}
		}
	}
	if op.Result != nil {
		out.Result = json.RawMessage(*op.Result)
	}
	if op.Review != nil {
		out.Review = reviewJSON{ID: op.Review.ID, Status: op.Review.Status, Reason: op.Review.Reason}
	}
	if op.ErrorClass != nil {
		out.Error = &errorJSON{Class: *op.ErrorClass, DownstreamStatus: op.DownstreamStatus}
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

type eventJSON struct {
	ID        int64           `json:"id"`
	At        time.Time       `json:"at"`
	Type      string          `json:"type"`
	FromState *models.State   `json:"from_state"`
	ToState   *models.State   `json:"to_state"`
	Attempt   *int            `json:"attempt"`
	Actor     string          `json:"actor"`
	Detail    json.RawMessage `json:"detail"`
}

func renderEvent(e models.Event) eventJSON {
	out := eventJSON{ID: e.ID, At: e.At.UTC(), Type: e.Type, FromState: e.FromState, ToState: e.ToState,
		Attempt: e.Attempt, Actor: e.Actor, Detail: jsonNull}
	if e.Detail != nil {
		out.Detail = json.RawMessage(*e.Detail)
	}
	return out
}
