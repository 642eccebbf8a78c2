package jobs

import (
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// DeliveryInput is everything the fate of a webhook attempt depends on.
type DeliveryInput struct {
	// Delivered says the receiver answered 2xx.
	Delivered bool
	// Attempt is the number of the attempt that just ended within the current window (1 for
	// the first, and for the first after a redelivery).
	Attempt int
	// WindowStart and Window bound the retries: no attempt is scheduled after
	// WindowStart+Window.
	WindowStart time.Time
	Window      time.Duration
	// Backoff spaces the retries (its InitialBackoff and MaxBackoff; MaxAttempts is unused).
	Backoff catalog.RetryPolicy
	Now     time.Time
	Jitter  float64 // uniform in [0, 1)
}

// DeliveryDecision is what happens to the delivery next.
type DeliveryDecision struct {
	Status        string    // delivered, pending or dead
	NextAttemptAt time.Time // pending: when to try again
}

// DecideDelivery is the retry policy of webhook deliveries, a pure function: a 2xx ends the
// delivery as delivered; anything else schedules a retry after exponential backoff with full
// jitter (the same Backoff as downstream attempts), unless that retry would fall outside the
// delivery's window, in which case the delivery is dead.
func DecideDelivery(in DeliveryInput) DeliveryDecision {
	if in.Delivered {
		return DeliveryDecision{Status: models.DeliveryDelivered}
	}
	next := in.Now.Add(Backoff(in.Backoff, max(in.Attempt, 1), in.Jitter))
	if next.After(in.WindowStart.Add(in.Window)) {
		return DeliveryDecision{Status: models.DeliveryDead}
	}
	return DeliveryDecision{Status: models.DeliveryPending, NextAttemptAt: next}
}
