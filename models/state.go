package models

// State is where an operation stands (docs/STATES.md).
type State string

// The six states.
const (
	StatePending          State = "PENDING"
	StateAwaitingApproval State = "AWAITING_APPROVAL"
	StateRunning          State = "RUNNING"
	StateSucceeded        State = "SUCCEEDED"
	StateFailedFinal      State = "FAILED_FINAL"
	StateUnknown          State = "UNKNOWN"
)

// States lists every state in the order the console shows them.
var States = []State{StatePending, StateAwaitingApproval, StateRunning, StateUnknown, StateSucceeded, StateFailedFinal}

// Terminal reports whether s never changes again.
func (s State) Terminal() bool { return s == StateSucceeded || s == StateFailedFinal }

// Valid reports whether s is one of the six states.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// legal is the whole state machine: every transition the ledger will write, and nothing else.
var legal = map[State][]State{
	StateAwaitingApproval: {StatePending, StateFailedFinal},
	StatePending:          {StateRunning, StateFailedFinal},
	StateRunning:          {StateSucceeded, StateFailedFinal, StatePending, StateUnknown},
	StateUnknown:          {StateSucceeded, StatePending, StateFailedFinal},
}

// CanTransition reports whether from → to is a legal transition.
func CanTransition(from, to State) bool {
	for _, s := range legal[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Error classes recorded on operations that failed or were stopped (docs/API.md).
const (
	ErrorRejected           = "rejected"
	ErrorAmbiguous          = "ambiguous"
	ErrorNotSent            = "not_sent"
	ErrorThrottled          = "throttled"
	ErrorRetriesExhausted   = "retries_exhausted"
	ErrorCancelled          = "cancelled"
	ErrorRejectedByReviewer = "rejected_by_reviewer"
	ErrorPermissionRevoked  = "permission_revoked"
	// ErrorPolicyDenied: an approved operation that a policy rule denies by the time it runs
	// (docs/POLICY.md): an approval is no licence for what the policy has since forbidden.
	ErrorPolicyDenied = "policy_denied"
)

// Event types (docs/API.md).
const (
	EventCreated            = "created"
	EventStateChanged       = "state_changed"
	EventAttemptStarted     = "attempt_started"
	EventAttemptFinished    = "attempt_finished"
	EventRetryScheduled     = "retry_scheduled"
	EventReconcileStarted   = "reconcile_started"
	EventReconcileFinished  = "reconcile_finished"
	EventEscalated          = "escalated"
	EventReviewAction       = "review_action"
	EventCompensationLinked = "compensation_linked"
)
