package models

import (
	"strings"
	"time"
)

// Tenant is an isolated customer of the gateway. Its name is its identity.
type Tenant struct {
	Name      string `gorm:"column:name;primaryKey"`
	CreatedAt time.Time
}

// Principal is an agent identity within a tenant; every API key belongs to one.
type Principal struct {
	ID        string `gorm:"primaryKey"`
	Tenant    string
	Name      string
	CreatedAt time.Time
}

// APIKey is stored as a hash; Prefix is its first characters, kept to name and revoke it.
type APIKey struct {
	ID          string `gorm:"primaryKey"`
	Tenant      string
	PrincipalID string
	Prefix      string
	Hash        string
	Tools       string // comma-separated tool names, or "*"
	CreatedAt   time.Time
	RevokedAt   *time.Time
	// LastUsedAt is when the key last authenticated a request, kept to within
	// keyUseResolution; nil when never.
	LastUsedAt *time.Time
}

// TableName keeps GORM off its pluralisation guesses.
func (APIKey) TableName() string { return "api_keys" }

// AllowsTool reports whether the key may use the named tool.
func (k *APIKey) AllowsTool(name string) bool { return toolListAllows(k.Tools, name) }

func toolListAllows(list, name string) bool {
	for _, t := range strings.Split(list, ",") {
		if t = strings.TrimSpace(t); t == "*" || t == name {
			return true
		}
	}
	return false
}

// Operation is one logical action an agent asked for: (tenant, key) → tool + params.
type Operation struct {
	ID          string `gorm:"primaryKey"`
	Tenant      string
	Key         string `gorm:"column:op_key"`
	Tool        string
	Fingerprint string
	// Params are the canonical JSON params, as sent downstream, or, when they are sealed
	// (ParamsSealed), with each sensitive value replaced by "***"; nil once purged.
	Params *string
	// ParamsSealed holds the params as sent downstream, encrypted with a data key (see
	// Ledger.Params); nil when Params holds them in clear.
	ParamsSealed *string
	// DownstreamKey is the key sent downstream (docs/STATES.md); nil on operations recorded before
	// downstream keys were derived, which use their id (see DownstreamKeySent).
	DownstreamKey *string
	// Justification is the agent's reason for the operation (docs/API.md), with the call's
	// sensitive values masked; the first one recorded is kept. nil when none was given.
	Justification *string
	Result        *string // the downstream's 2xx body as JSON; nil when none
	// UpstreamResult is an MCP server's whole answer (its CallToolResult as JSON, scrubbed):
	// what idemgate's /mcp replays. nil for HTTP tools, and once purged.
	UpstreamResult   *string
	State            State
	ErrorClass       *string
	ErrorMessage     *string
	DownstreamStatus *int
	DownstreamRef    *string
	Attempts         int
	Ambiguous        bool // some attempt had an ambiguous outcome: exhaustion leads to UNKNOWN
	NextAttemptAt    *time.Time
	LeaseOwner       *string
	LeaseExpiresAt   *time.Time
	Fence            int64
	PrincipalID      string
	APIKeyID         string `gorm:"column:api_key_id"`
	WorkflowRunID    *string
	StepID           *string
	Compensates      *string
	CompensatedBy    *string
	ReviewID         *string
	UnknownSince     *time.Time
	Probes           int        // reconcile probes made while UNKNOWN
	NextProbeAt      *time.Time // when the reconciler asks the downstream next
	// The ledger sets both timestamps itself, from its injected clock, so the value
	// answered to the agent is the value stored.
	CreatedAt   time.Time `gorm:"autoCreateTime:false"`
	UpdatedAt   time.Time `gorm:"autoUpdateTime:false"`
	CompletedAt *time.Time
	PurgedAt    *time.Time

	// Review is the operation's current review, loaded with it when ReviewID is set.
	Review *Review `gorm:"-"`
	// Policy is what the policies and budgets decided when it was recorded (docs/POLICY.md),
	// when known: set by Submit, and read for the webhook and email payloads (attachPolicy);
	// nil otherwise, and for operations no policy applied to.
	Policy *PolicyDecision `gorm:"-"`
}

// operationColumns are the columns of operations in the order Operation.columns lists their
// fields. The hottest reads (the key look-up that answers every replay) scan by hand: GORM's
// reflective scan cost more CPU than the rest of the look-up. TestOperationColumns keeps the
// two lists in step with the struct.
const operationColumns = "id, tenant, op_key, tool, fingerprint, params, result, state, error_class, error_message, " +
	"downstream_status, downstream_ref, attempts, ambiguous, next_attempt_at, lease_owner, lease_expires_at, fence, " +
	"principal_id, api_key_id, workflow_run_id, step_id, compensates, compensated_by, review_id, unknown_since, " +
	"probes, next_probe_at, created_at, updated_at, completed_at, purged_at, params_sealed, downstream_key, justification, upstream_result"

// columns returns pointers to op's fields in the order of operationColumns.
func (op *Operation) columns() []any {
	return []any{&op.ID, &op.Tenant, &op.Key, &op.Tool, &op.Fingerprint, &op.Params, &op.Result, &op.State,
		&op.ErrorClass, &op.ErrorMessage, &op.DownstreamStatus, &op.DownstreamRef, &op.Attempts, &op.Ambiguous,
		&op.NextAttemptAt, &op.LeaseOwner, &op.LeaseExpiresAt, &op.Fence, &op.PrincipalID, &op.APIKeyID,
		&op.WorkflowRunID, &op.StepID, &op.Compensates, &op.CompensatedBy, &op.ReviewID, &op.UnknownSince,
		&op.Probes, &op.NextProbeAt, &op.CreatedAt, &op.UpdatedAt, &op.CompletedAt, &op.PurgedAt, &op.ParamsSealed,
		&op.DownstreamKey, &op.Justification, &op.UpstreamResult}
}

// DownstreamKeySent is the key op sends downstream (in X-Idemgate-Downstream-Key, the tool's
// idempotency_header and {{.DownstreamKey}}): its downstream key, or, for an operation
// recorded before downstream keys were derived, its id, which it was sent with from its
// first attempt and keeps until it ends.
func (op *Operation) DownstreamKeySent() string {
	if op.DownstreamKey != nil {
		return *op.DownstreamKey
	}
	return op.ID
}

// Attempt is one try at the downstream call. Its id is the X-Request-Id sent downstream.
type Attempt struct {
	ID               string `gorm:"primaryKey"`
	OperationID      string
	Number           int
	Fence            int64
	Worker           string
	StartedAt        time.Time
	FinishedAt       *time.Time
	Class            *string
	DownstreamStatus *int
	LatencyMS        *int64 `gorm:"column:latency_ms"`
	Error            *string
	TraceID          *string
}

// Event is one line of an operation's timeline, written in the same transaction as the change
// it records.
type Event struct {
	ID          int64 `gorm:"primaryKey;autoIncrement"`
	OperationID string
	Tenant      string
	At          time.Time
	Type        string
	FromState   *State
	ToState     *State
	Attempt     *int
	Actor       string
	Detail      *string // JSON object
}

// Review states and reasons (docs/API.md).
const (
	ReviewOpen     = "open"
	ReviewResolved = "resolved"

	ReasonUnknownOutcome       = "unknown_outcome"
	ReasonApprovalRequired     = "approval_required"
	ReasonCompensationApproval = "compensation_approval"
	ReasonManual               = "manual"
)

// Review asks humans to settle what code cannot. At most one review of an operation is open at
// a time.
type Review struct {
	ID          string `gorm:"primaryKey"`
	Tenant      string
	OperationID string
	Reason      string
	Status      string
	OpenedAt    time.Time
	OpenedBy    string
	ResolvedAt  *time.Time
	ResolvedBy  *string
	Resolution  *string
	// ExpiryWarnedAt is when the warning that an approval review's window closes soon went
	// out; nil until then, and for other reviews.
	ExpiryWarnedAt *time.Time
	// ClaimedBy (an actor, user:<email>) has taken the review until ClaimedUntil; a claim past
	// that time is no claim.
	ClaimedBy    *string
	ClaimedUntil *time.Time
	// ClaimedByID is the claim holder's user id (Person); nil on claims taken before ids were
	// kept.
	ClaimedByID *string
}

func ptr[T any](v T) *T { return &v }
