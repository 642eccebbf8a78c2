package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// State is an operation's state.
type State string

// The states of an operation. SUCCEEDED and FAILED_FINAL are terminal and never change.
const (
	StatePending          State = "PENDING"
	StateAwaitingApproval State = "AWAITING_APPROVAL"
	StateRunning          State = "RUNNING"
	StateSucceeded        State = "SUCCEEDED"
	StateFailedFinal      State = "FAILED_FINAL"
	StateUnknown          State = "UNKNOWN"
)

// Terminal reports whether the state never changes again.
func (s State) Terminal() bool { return s == StateSucceeded || s == StateFailedFinal }

// Operation is one logical action recorded in idemgate's ledger, as the API answers it.
type Operation struct {
	ID          string `json:"id"`
	Key         string `json:"key"`
	Tool        string `json:"tool"`
	State       State  `json:"state"`
	Fingerprint string `json:"fingerprint"`
	// Params are the call's params, sensitive ones shown as "***"; null once retention has
	// dropped them.
	Params json.RawMessage `json:"params"`
	// Result is the downstream's answer once SUCCEEDED; see DecodeResult.
	Result        json.RawMessage `json:"result"`
	Error         *OperationError `json:"error"`
	DownstreamRef string          `json:"downstream_ref"`
	// DownstreamKey is the key idemgate sends the downstream for this operation: the same
	// for every attempt, and for the same key after the ledger lost its record.
	DownstreamKey string     `json:"downstream_key"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	Review        *Review    `json:"review"`
	Compensates   string     `json:"compensates"`
	CompensatedBy string     `json:"compensated_by"`
	WorkflowRunID string     `json:"workflow_run_id"`
	StepID        string     `json:"step_id"`
	// Justification is the agent's reason as first recorded, masked; "" when none was given.
	Justification string     `json:"justification"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	CompletedAt   *time.Time `json:"completed_at"`

	// Replayed reports that the gateway answered with an operation an earlier request under
	// the same key had recorded (Idempotent-Replayed: true): nothing ran for this request.
	Replayed bool `json:"-"`
}

// OperationError says why an operation failed or is uncertain.
type OperationError struct {
	// Class is one of rejected, ambiguous, not_sent, throttled, retries_exhausted, cancelled,
	// rejected_by_reviewer, permission_revoked.
	Class            string `json:"class"`
	Message          string `json:"message"`
	DownstreamStatus *int   `json:"downstream_status"`
}

// Review is an operation's current review by people.
type Review struct {
	ID     string `json:"id"`
	Status string `json:"status"` // open or resolved
	Reason string `json:"reason"` // unknown_outcome, approval_required, compensation_approval or manual
}

// DecodeResult decodes the operation's result into v.
func (o *Operation) DecodeResult(v any) error {
	if len(o.Result) == 0 || string(o.Result) == "null" {
		return fmt.Errorf("client: operation %s has no result (state %s)", o.ID, o.State)
	}
	if err := json.Unmarshal(o.Result, v); err != nil {
		return fmt.Errorf("client: decode result of %s: %w", o.ID, err)
	}
	return nil
}

// FailedError is the error of an operation that ended FAILED_FINAL. It matches
// ErrOperationFailed.
type FailedError struct {
	Op *Operation
}

func (e *FailedError) Error() string {
	var why []string
	if e.Op.Error != nil {
		why = append(why, e.Op.Error.Class)
		if e.Op.Error.Message != "" {
			why = append(why, e.Op.Error.Message)
		}
	}
	return fmt.Sprintf("idemgate: operation %s (%s) failed: %s", e.Op.ID, e.Op.Tool, strings.Join(why, ": "))
}

// Is reports whether target is ErrOperationFailed.
func (e *FailedError) Is(target error) bool { return target == ErrOperationFailed }

// outcome is the error that goes with op once Do or Wait stops looking at it: none for
// SUCCEEDED, a *FailedError for FAILED_FINAL, and for an operation not yet terminal (the
// context ended) its state's sentinel joined with cause.
func (o *Operation) outcome(cause error) error {
	switch o.State {
	case StateSucceeded:
		return nil
	case StateFailedFinal:
		return &FailedError{Op: o}
	}
	return fmt.Errorf("idemgate: operation %s is still %s; ask again later with the same key: %w",
		o.ID, o.State, errors.Join(pendingSentinel(o.State), cause))
}

// pendingSentinel is the sentinel of a state that is not terminal.
func pendingSentinel(s State) error {
	switch s {
	case StateUnknown:
		return ErrOperationUncertain
	case StateAwaitingApproval:
		return ErrOperationAwaitingApproval
	}
	return ErrOperationInProgress
}
