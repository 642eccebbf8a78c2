package views

// WebhooksPage is the admin page of webhook subscriptions and their deliveries (docs/WEBHOOKS.md).
type WebhooksPage struct {
	Page   Page
	Notice *NoticeText
	// NewSecret is a subscription just created, with its signing secret shown this once.
	NewSecret     *NewWebhookSecret
	Subscriptions []WebhookRow
	TenantOptions []Option
	EventTypes    []string
	Formats       []Option
	// MayAllowPrivate offers targets on loopback or private addresses: only to an admin of
	// every tenant, since such a target reaches into the gateway's own network.
	MayAllowPrivate bool
	// Filters of the deliveries list.
	StatusOptions []Option
	TenantFilter  []Option
	Operation     string
	Deliveries    []DeliveryView
	// Dead counts the dead deliveries listed, which the page calls attention to.
	Dead int
}

// NewWebhookSecret is the secret that signs a subscription just created, with a line saying
// which.
type NewWebhookSecret struct {
	Title  string
	Secret string
}

// WebhookRow is a live subscription.
type WebhookRow struct {
	ID     string
	Tenant string
	URL    string
	Events string
	Format string
	// RoutingKey says where a PagerDuty subscription's key is: "•••• 1a2b" for a sealed value,
	// the reference an operator gave, or "".
	RoutingKey   string
	AllowPrivate bool
	Created      Time
}

// DeliveryView is one message on its way to one subscription, with its attempts.
type DeliveryView struct {
	ID            string
	WebhookID     string // the webhook-id receivers see
	EventType     string
	Tenant        string
	OperationID   string
	OperationHref string
	URL           string
	Status        string // pending, delivered, dead
	Attempts      int
	LastError     string
	Created       Time
	NextAttempt   *Time // pending only
	Delivered     *Time
	// Redeliverable says an admin may queue it again now.
	Redeliverable bool
	History       []DeliveryAttemptView
}

// DeliveryAttemptView is one POST of a delivery.
type DeliveryAttemptView struct {
	At      Time
	Status  string // the receiver's status, or "no answer"
	Latency string
	Error   string
}

// DeliveryBadgeClass is the badge class of a delivery status: dead looks like a failure.
func DeliveryBadgeClass(status string) string {
	switch status {
	case "delivered":
		return "badge badge--succeeded"
	case "dead":
		return "badge badge--failed-final"
	}
	return "badge badge--pending"
}

// deadText is the attention line of a page listing dead deliveries.
func deadText(n int) string {
	if n == 1 {
		return "1 delivery listed below is dead: its receiver did not accept it within the retry window. Redeliver it once the receiver is fixed."
	}
	return itoa(n) + " deliveries listed below are dead: their receivers did not accept them within the retry window. Redeliver them once the receivers are fixed."
}
