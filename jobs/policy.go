// Package jobs executes operations: the outcome classifier and retry policy of docs/STATES.md, the
// request path that runs the first attempt inline, and the background jobs that keep every
// operation moving (docs/STATES.md). The requests themselves are jobs/downstream's.
package jobs

import (
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// Class is what one attempt's outcome says about the side effect (docs/STATES.md).
type Class string

// The outcome classes.
const (
	// NotSent: the request never left (no connection, DNS failure, refused).
	NotSent Class = "not_sent"
	// Throttled: 429 or 503; the downstream asked us to come back later.
	Throttled Class = "throttled"
	// Ambiguous: the request left and we cannot tell whether it took effect.
	Ambiguous Class = "ambiguous"
	// Rejected: the downstream refused the request (4xx); repeating it changes nothing.
	Rejected Class = "rejected"
	// Succeeded: a 2xx with a readable body.
	Succeeded Class = "succeeded"
)

// PolicyInput is everything the retry decision depends on. It holds no I/O: the decision is a
// pure function of it, so it can be table-tested exhaustively.
type PolicyInput struct {
	Class Class
	// Attempt is the number of the attempt that just ended, counting from 1.
	Attempt int
	// HadAmbiguous says an earlier attempt of this operation was ambiguous.
	HadAmbiguous bool
	// RetrySafe says an ambiguous attempt may be repeated: the effect is read or idempotent, or
	// the downstream deduplicates on the key we send (catalog.Tool.RetrySafe).
	RetrySafe bool
	Retry     catalog.RetryPolicy
	// RetryAfter is the downstream's Retry-After, zero when it sent none; for a not_sent
	// attempt held while the downstream is known down, how long it is expected to stay so.
	RetryAfter time.Duration
	// Unsent is how many earlier attempts of the operation sent nothing (not_sent): they count
	// against Retry.UnsentFor, not against Retry.MaxAttempts. Age is how long ago the
	// operation was recorded.
	Unsent int
	Age    time.Duration
	Now    time.Time
	// Jitter is a uniform draw from [0, 1), made by the caller so the function stays pure.
	Jitter float64
}

// Decision is what happens to the operation after an attempt.
type Decision struct {
	To models.State
	// ErrorClass is recorded on FAILED_FINAL and UNKNOWN.
	ErrorClass string
	// NextAttemptAt is set when To is PENDING.
	NextAttemptAt time.Time
}

// Decide applies docs/STATES.md. The model never decides whether a retry is allowed; this does.
func Decide(in PolicyInput) Decision {
	switch in.Class {
	case Succeeded:
		return Decision{To: models.StateSucceeded}
	case Rejected:
		if in.HadAmbiguous {
			// A refusal of the retry says nothing about the earlier attempt, which may have
			// taken effect (a downstream may refuse a key it has already used): the outcome
			// is still unknown, never a failure.
			return Decision{To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous}
		}
		return Decision{To: models.StateFailedFinal, ErrorClass: models.ErrorRejected}
	case Ambiguous:
		if !in.RetrySafe {
			// The side effect may have happened and repeating it is not known to be safe:
			// reconcile or escalate, never retry blindly.
			return Decision{To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous}
		}
	}
	// Attempts that sent nothing are bounded by time, not by count: an unreachable downstream
	// must not end an operation before anything was sent (docs/STATES.md).
	if in.Class == NotSent && in.Age >= in.Retry.UnsentFor || in.Class != NotSent && in.Attempt-in.Unsent >= in.Retry.MaxAttempts {
		if in.HadAmbiguous || in.Class == Ambiguous {
			return Decision{To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous}
		}
		return Decision{To: models.StateFailedFinal, ErrorClass: models.ErrorRetriesExhausted}
	}
	delay := Backoff(in.Retry, in.Attempt, in.Jitter)
	if (in.Class == Throttled || in.Class == NotSent) && in.RetryAfter > 0 {
		delay = min(in.RetryAfter, in.Retry.MaxBackoff)
	}
	return Decision{To: models.StatePending, NextAttemptAt: in.Now.Add(delay)}
}

// Backoff is the delay before the retry that follows attempt n: exponential with full jitter,
// drawn uniformly between initial_backoff and initial_backoff·2^(n-1), capped at max_backoff.
// The floor of initial_backoff keeps a jitter draw near zero from hammering a struggling
// downstream.
func Backoff(p catalog.RetryPolicy, n int, jitter float64) time.Duration {
	ceiling := p.InitialBackoff
	for i := 1; i < n && ceiling < p.MaxBackoff; i++ {
		if ceiling > p.MaxBackoff/2 { // doubling would pass the cap (or overflow)
			ceiling = p.MaxBackoff
			break
		}
		ceiling *= 2
	}
	ceiling = min(ceiling, p.MaxBackoff)
	if ceiling <= p.InitialBackoff {
		return ceiling
	}
	jitter = min(max(jitter, 0), 1)
	return p.InitialBackoff + time.Duration(jitter*float64(ceiling-p.InitialBackoff))
}

// Classify maps what the connector saw to a class. wrote says the request's headers left
// this process; after that, silence proves nothing.
func Classify(status int, wrote bool, transportErr, bodyErr error) Class {
	if transportErr != nil {
		if !wrote {
			return NotSent
		}
		return Ambiguous
	}
	switch {
	case status == 429 || status == 503:
		return Throttled
	case status >= 200 && status < 300:
		if bodyErr != nil {
			return Ambiguous
		}
		return Succeeded
	case status >= 400 && status < 500:
		return Rejected
	default:
		// 500, 502 and 504 are ambiguous by docs/STATES.md. Other 5xx, 1xx and 3xx (we never follow
		// redirects) say nothing certain about the side effect either, so they are treated
		// the same way: the conservative reading.
		return Ambiguous
	}
}

// probePolicy spaces reconcile probes that got no usable answer.
var probePolicy = catalog.RetryPolicy{InitialBackoff: probeInitial, MaxBackoff: probeMax}
