package models

import (
	"slices"
	"strings"
	"time"
)

// Webhook event types (docs/WEBHOOKS.md).
const (
	WebhookOperationSucceeded        = "operation.succeeded"
	WebhookOperationFailed           = "operation.failed"
	WebhookOperationUnknown          = "operation.unknown"
	WebhookOperationAwaitingApproval = "operation.awaiting_approval"
	WebhookReviewOpened              = "review.opened"
	WebhookReviewResolved            = "review.resolved"
	// WebhookReviewExpiring warns that an approval's window closes soon (serve
	// --approval-warning before it lapses); not in docs/WEBHOOKS.md's list, which it extends.
	WebhookReviewExpiring = "review.expiring"
)

// WebhookEventTypes lists every event type a subscription may ask for.
var WebhookEventTypes = []string{
	WebhookOperationSucceeded, WebhookOperationFailed, WebhookOperationUnknown,
	WebhookOperationAwaitingApproval, WebhookReviewOpened, WebhookReviewResolved, WebhookReviewExpiring,
}

// operationEventFor is the event type a transition to state to announces, or "" for none.
func operationEventFor(to State) string {
	switch to {
	case StateSucceeded:
		return WebhookOperationSucceeded
	case StateFailedFinal:
		return WebhookOperationFailed
	case StateUnknown:
		return WebhookOperationUnknown
	case StateAwaitingApproval:
		return WebhookOperationAwaitingApproval
	}
	return ""
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryDead      = "dead"
)

// WebhookSubscription asks for a tenant's events of some types to be posted to a URL.
type WebhookSubscription struct {
	ID     string `gorm:"primaryKey"`
	Tenant string
	URL    string `gorm:"column:url"`
	Events string // comma-separated event types
	// Secret signs every delivery ("whsec_" + base64 of 32 random bytes). It is stored
	// because signing needs it (see webhooksSchema), shown once at creation, and left empty in
	// everything the ledger lists.
	Secret       string
	AllowPrivate bool
	// Format is the body's format (WebhookFormats). A PagerDuty subscription's routing key is
	// either RoutingKeySealed, a value sealed under the data key (RoutingKeyHint shows its last
	// four characters), or RoutingKey, a secret reference an operator gave on the command line
	// (SecretRefPolicy). Lists never read the sealed value.
	Format           string
	RoutingKey       *string
	RoutingKeySealed *string `json:"-"`
	RoutingKeyHint   *string
	CreatedAt        time.Time `gorm:"autoCreateTime:false"`
	DeletedAt        *time.Time
}

// EventList returns the subscription's event types.
func (s *WebhookSubscription) EventList() []string { return strings.Split(s.Events, ",") }

// Wants reports whether the subscription asks for events of type typ.
func (s *WebhookSubscription) Wants(typ string) bool { return slices.Contains(s.EventList(), typ) }

// OutboxMessage is one notification, written in the same transaction as the change it
// reports. Its id is the webhook-id every delivery of it carries; Payload is the JSON body,
// already masked.
type OutboxMessage struct {
	ID          string `gorm:"primaryKey"`
	Tenant      string
	EventType   string
	OperationID string
	OccurredAt  time.Time
	Payload     string
	CreatedAt   time.Time `gorm:"autoCreateTime:false"`
}

// TableName names the outbox table.
func (OutboxMessage) TableName() string { return "outbox" }

// WebhookDelivery is one outbox message on its way to one subscription.
type WebhookDelivery struct {
	ID             string `gorm:"primaryKey"`
	OutboxID       string
	SubscriptionID string
	Status         string // pending, delivered, dead
	// Attempts counts the claims so far; it is also the fencing token of the current claim.
	Attempts       int
	NextAttemptAt  time.Time
	LeaseOwner     *string
	LeaseExpiresAt *time.Time
	LastError      *string
	CreatedAt      time.Time `gorm:"autoCreateTime:false"`
	DeliveredAt    *time.Time
	// RedeliveredAt is when an admin last queued the delivery again; its retry window starts
	// there instead of at CreatedAt.
	RedeliveredAt *time.Time
	// EndedAt is when the delivery was delivered or went dead (nil while pending): the
	// retention job deletes it once that is older than the webhook retention.
	EndedAt *time.Time
	// PriorAttempts counts the claims before the current retry window (see WindowAttempt).
	PriorAttempts int
}

// WindowAttempt is the number of the current claim within the current retry window: a
// redelivery starts counting, and so backing off, afresh.
func (d *WebhookDelivery) WindowAttempt() int { return d.Attempts - d.PriorAttempts }

// WindowStart is when the delivery's current retry window began.
func (d *WebhookDelivery) WindowStart() time.Time {
	if d.RedeliveredAt != nil {
		return *d.RedeliveredAt
	}
	return d.CreatedAt
}

// WebhookAttempt is one try at posting a delivery: the receiver's status (nil when no answer
// came), how long it took, and what went wrong.
type WebhookAttempt struct {
	ID         int64 `gorm:"primaryKey;autoIncrement"`
	DeliveryID string
	At         time.Time
	StatusCode *int
	LatencyMS  int64 `gorm:"column:latency_ms"`
	Error      *string
}

// TableName names the subscriptions table.
func (WebhookSubscription) TableName() string { return "webhook_subscriptions" }

// TableName names the deliveries table.
func (WebhookDelivery) TableName() string { return "webhook_deliveries" }

// TableName names the attempts table.
func (WebhookAttempt) TableName() string { return "webhook_attempts" }
