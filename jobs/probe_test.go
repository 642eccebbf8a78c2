package jobs_test

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
)

// TestDecideProbe: what a reconcile probe's answer means (docs/TOOLS.md), on a fixed clock. A "not
// found" proves the operation was not executed only once settle has passed since it became
// UNKNOWN; inside the window it proves nothing, and the next probe is due exactly when the
// window ends.
func TestDecideProbe(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	const settle = 300 * time.Millisecond
	tests := []struct {
		name      string
		in        jobs.ProbeInput
		outcome   string
		to        models.State
		nextProbe time.Time // zero: no probe is scheduled
		class     string
	}{
		{"2xx: found", jobs.ProbeInput{Status: 200, SinceUnknown: 0}, jobs.ProbeFound, models.StateSucceeded, time.Time{}, ""},
		{"404 inside settle: proves nothing yet", jobs.ProbeInput{Status: 404, SinceUnknown: settle - time.Millisecond, AttemptsLeft: true},
			jobs.ProbeNotSettled, models.StateUnknown, now.Add(time.Millisecond), ""},
		{"404 at once: asked again when settle ends", jobs.ProbeInput{Status: 404, SinceUnknown: 0, AttemptsLeft: true},
			jobs.ProbeNotSettled, models.StateUnknown, now.Add(settle), ""},
		{"404 once settle passed: not executed, retried", jobs.ProbeInput{Status: 404, SinceUnknown: settle, AttemptsLeft: true},
			jobs.ProbeNotFound, models.StatePending, time.Time{}, ""},
		{"404 once settle passed, no attempts left", jobs.ProbeInput{Status: 404, SinceUnknown: time.Hour},
			jobs.ProbeNotFound, models.StateFailedFinal, time.Time{}, models.ErrorRetriesExhausted},
		{"404 read from a broken answer proves nothing", jobs.ProbeInput{Status: 404, Failed: true, SinceUnknown: time.Hour, AttemptsLeft: true},
			jobs.ProbeError, models.StateUnknown, now.Add(500 * time.Millisecond), ""},
		{"500: still unknown", jobs.ProbeInput{Status: 500, SinceUnknown: time.Hour, AttemptsLeft: true},
			jobs.ProbeError, models.StateUnknown, now.Add(500 * time.Millisecond), ""},
		{"2xx without the found value inside settle: proves nothing yet", jobs.ProbeInput{Status: 200, Missing: true, SinceUnknown: 0, AttemptsLeft: true},
			jobs.ProbeNotSettled, models.StateUnknown, now.Add(settle), ""},
		{"2xx without the found value once settle passed: not executed, retried", jobs.ProbeInput{Status: 200, Missing: true, SinceUnknown: settle, AttemptsLeft: true},
			jobs.ProbeNotFound, models.StatePending, time.Time{}, ""},
		{"2xx without the found value, no attempts left", jobs.ProbeInput{Status: 200, Missing: true, SinceUnknown: time.Hour},
			jobs.ProbeNotFound, models.StateFailedFinal, time.Time{}, models.ErrorRetriesExhausted},
		{"no answer: still unknown", jobs.ProbeInput{Failed: true, SinceUnknown: time.Hour, AttemptsLeft: true},
			jobs.ProbeError, models.StateUnknown, now.Add(500 * time.Millisecond), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Settle, in.Now, in.Probes, in.Jitter = settle, now, 0, 1
			d := jobs.DecideProbe(in)
			assert.Equal(t, tc.outcome, d.Outcome)
			assert.Equal(t, tc.to, d.To)
			assert.Equal(t, tc.class, d.ErrorClass)
			if tc.to == models.StateUnknown {
				assert.Equal(t, tc.nextProbe, d.NextProbeAt)
			}
		})
	}
}
