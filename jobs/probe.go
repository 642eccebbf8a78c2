package jobs

import (
	"time"

	"github.com/idemgate/idemgate/models"
)

// Probe outcomes, as recorded on the timeline.
const (
	ProbeFound      = "found"
	ProbeNotFound   = "not_found"
	ProbeNotSettled = "not_settled"
	ProbeError      = "error"
)

// ProbeInput is everything the reconcile decision depends on (SPEC §4): pure, like Decide.
type ProbeInput struct {
	Status       int  // 0 when no answer came
	Failed       bool // transport error or unreadable body
	SinceUnknown time.Duration
	Settle       time.Duration
	AttemptsLeft bool
	Probes       int // probes made so far, this one included
	Now          time.Time
	Jitter       float64
}

// ProbeDecision is what a probe's answer means for the operation.
type ProbeDecision struct {
	Outcome     string
	To          models.State
	NextProbeAt time.Time // To UNKNOWN
	ErrorClass  string    // To FAILED_FINAL
}

// Reconcile probes back off from probeInitial to probeMax: a struggling downstream is asked
// less and less often, but never forgotten.
const (
	probeInitial = 500 * time.Millisecond
	probeMax     = time.Minute
)

// DecideProbe applies SPEC §4: 2xx → found (SUCCEEDED); 404 once settle has passed → proven
// not executed (PENDING if attempts remain, else FAILED_FINAL); a 404 inside the settle window
// proves nothing yet; anything else → still UNKNOWN, asked again with backoff.
func DecideProbe(in ProbeInput) ProbeDecision {
	switch {
	case !in.Failed && in.Status >= 200 && in.Status < 300:
		return ProbeDecision{Outcome: ProbeFound, To: models.StateSucceeded}
	case !in.Failed && in.Status == 404 && in.SinceUnknown >= in.Settle:
		if in.AttemptsLeft {
			return ProbeDecision{Outcome: ProbeNotFound, To: models.StatePending}
		}
		return ProbeDecision{Outcome: ProbeNotFound, To: models.StateFailedFinal, ErrorClass: models.ErrorRetriesExhausted}
	case !in.Failed && in.Status == 404:
		// The downstream may not show the operation yet: ask again once settle has passed.
		return ProbeDecision{Outcome: ProbeNotSettled, To: models.StateUnknown, NextProbeAt: in.Now.Add(in.Settle - in.SinceUnknown)}
	}
	p := Backoff(probePolicy, in.Probes, in.Jitter)
	return ProbeDecision{Outcome: ProbeError, To: models.StateUnknown, NextProbeAt: in.Now.Add(p)}
}
