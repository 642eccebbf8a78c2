package jobs_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testPolicy is the retry policy of the exhaustive table: four attempts, so there is a first,
// a middle and a last one.
var testPolicy = catalog.RetryPolicy{MaxAttempts: 4, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second,
	UnsentFor: 10 * time.Minute}

// testNow is the clock of every policy test.
var testNow = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// toolFor builds the catalogue entry whose RetrySafe the policy is given, so the table also
// exercises catalog.Tool.RetrySafe.
func toolFor(effect catalog.Effect, keys bool) catalog.Tool {
	t := catalog.Tool{Name: "t", Effect: effect, HTTP: catalog.HTTPSpec{Method: "POST"}, Retry: testPolicy}
	if keys {
		t.HTTP.IdempotencyHeader = "Idempotency-Key"
	}
	return t
}

// position is where an attempt stands among the allowed ones.
type position struct {
	name    string
	attempt int
}

var positions = []position{{"first", 1}, {"middle", 2}, {"last", testPolicy.MaxAttempts}}

// expectDecision is docs/STATES.md written out as rules, independently of the implementation: the
// state an attempt leads to and the error class recorded with it. A PENDING outcome is checked
// separately for its timing.
//
// last says the attempts ran out: for a not_sent attempt, when retry.unsent_for has passed since
// the operation was recorded; for any other, when the attempts that sent something (this one
// and the earlier ones that were not not_sent) reach max_attempts (issue 48).
func expectDecision(class jobs.Class, effect catalog.Effect, keys, last, hadAmbiguous bool) (models.State, string) {
	// "An ambiguous attempt is retried only when ... the tool's effect is read or idempotent,
	// or the downstream honours idempotency keys."
	retrySafe := effect == catalog.EffectRead || effect == catalog.EffectIdempotent || keys
	switch class {
	case jobs.Succeeded:
		return models.StateSucceeded, ""
	case jobs.Rejected:
		// A refusal of a retry says nothing of the ambiguous attempt before it, which may
		// have taken effect: only reconciliation or a reviewer may end it (docs/model).
		if hadAmbiguous {
			return models.StateUnknown, models.ErrorAmbiguous
		}
		return models.StateFailedFinal, models.ErrorRejected
	case jobs.Ambiguous:
		if !retrySafe {
			return models.StateUnknown, models.ErrorAmbiguous
		}
	}
	if last {
		// "When attempts run out: after only not_sent/throttled failures → FAILED_FINAL
		// (retries_exhausted); after any ambiguous failure → UNKNOWN."
		if hadAmbiguous || class == jobs.Ambiguous {
			return models.StateUnknown, models.ErrorAmbiguous
		}
		return models.StateFailedFinal, models.ErrorRetriesExhausted
	}
	return models.StatePending, ""
}

// TestDecideEveryCombination walks class × effect × key support × attempt position ×
// HadAmbiguous × the operation's age (inside or past retry.unsent_for) × its earlier not_sent
// attempts (none, or all of them) and checks each decision against docs/STATES.md.
func TestDecideEveryCombination(t *testing.T) {
	t.Parallel()
	classes := []jobs.Class{jobs.NotSent, jobs.Throttled, jobs.Ambiguous, jobs.Rejected, jobs.Succeeded}
	effects := []catalog.Effect{catalog.EffectRead, catalog.EffectIdempotent, catalog.EffectWrite}
	const jitter = 0.5
	cases := 0
	for _, class := range classes {
		for _, effect := range effects {
			for _, keys := range []bool{false, true} {
				for _, pos := range positions {
					for _, hadAmbiguous := range []bool{false, true} {
						for _, age := range []time.Duration{time.Minute, testPolicy.UnsentFor} {
							for _, unsent := range []int{0, pos.attempt - 1} {
								cases++
								name := fmt.Sprintf("%s/%s/keys=%t/%s/had_ambiguous=%t/age=%s/unsent=%d", class, effect, keys, pos.name, hadAmbiguous, age, unsent)
								t.Run(name, func(t *testing.T) {
									tool := toolFor(effect, keys)
									got := jobs.Decide(jobs.PolicyInput{
										Class: class, Attempt: pos.attempt, HadAmbiguous: hadAmbiguous, RetrySafe: tool.RetrySafe(),
										Retry: tool.Retry, Now: testNow, Jitter: jitter, Age: age, Unsent: unsent,
									})
									last := pos.attempt-unsent >= testPolicy.MaxAttempts
									if class == jobs.NotSent {
										last = age >= testPolicy.UnsentFor
									}
									wantState, wantClass := expectDecision(class, effect, keys, last, hadAmbiguous)
									assert.Equal(t, wantState, got.To)
									assert.Equal(t, wantClass, got.ErrorClass)
									if wantState != models.StatePending {
										assert.True(t, got.NextAttemptAt.IsZero(), "NextAttemptAt is only set on PENDING")
										return
									}
									assertBackoffWindow(t, testPolicy, pos.attempt, got.NextAttemptAt.Sub(testNow))
									assert.Equal(t, testNow.Add(jobs.Backoff(testPolicy, pos.attempt, jitter)), got.NextAttemptAt)
								})
							}
						}
					}
				}
			}
		}
	}
	require.Equal(t, 5*3*2*3*2*2*2, cases)
}

// assertBackoffWindow checks a retry delay after attempt n lies in the full-jitter window of
// docs/STATES.md: at least initial_backoff, at most min(max_backoff, initial_backoff·2^(n-1)).
func assertBackoffWindow(t *testing.T, p catalog.RetryPolicy, n int, delay time.Duration) {
	t.Helper()
	ceiling := p.InitialBackoff
	for i := 1; i < n && ceiling < p.MaxBackoff; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, p.MaxBackoff)
	assert.GreaterOrEqual(t, delay, p.InitialBackoff, "delay below initial_backoff")
	assert.LessOrEqual(t, delay, ceiling, "delay above the backoff ceiling of attempt %d", n)
}

// TestDecideNamedCases pins the rules of docs/STATES.md that matter most, one readable row each.
func TestDecideNamedCases(t *testing.T) {
	t.Parallel()
	write, writeKeys, idem := toolFor(catalog.EffectWrite, false), toolFor(catalog.EffectWrite, true), toolFor(catalog.EffectIdempotent, false)
	tests := []struct {
		name       string
		tool       catalog.Tool
		in         jobs.PolicyInput
		want       models.State
		wantClass  string
		wantNextAt time.Time
	}{
		{name: "ambiguous write without keys goes UNKNOWN on the first attempt", tool: write,
			in: jobs.PolicyInput{Class: jobs.Ambiguous, Attempt: 1}, want: models.StateUnknown, wantClass: models.ErrorAmbiguous},
		{name: "ambiguous write with keys is retried", tool: writeKeys,
			in: jobs.PolicyInput{Class: jobs.Ambiguous, Attempt: 1}, want: models.StatePending, wantNextAt: testNow.Add(100 * time.Millisecond)},
		{name: "ambiguous idempotent tool is retried", tool: idem,
			in: jobs.PolicyInput{Class: jobs.Ambiguous, Attempt: 2}, want: models.StatePending, wantNextAt: testNow.Add(100 * time.Millisecond)},
		{name: "not_sent past unsent_for after only not_sent fails retries_exhausted", tool: write,
			in: jobs.PolicyInput{Class: jobs.NotSent, Attempt: 4, Unsent: 3, Age: 10 * time.Minute}, want: models.StateFailedFinal, wantClass: models.ErrorRetriesExhausted},
		{name: "not_sent at max_attempts inside unsent_for is retried: nothing was sent", tool: write,
			in: jobs.PolicyInput{Class: jobs.NotSent, Attempt: 40, Unsent: 39, Age: 9 * time.Minute}, want: models.StatePending, wantNextAt: testNow.Add(100 * time.Millisecond)},
		{name: "a sent attempt after not_sent ones counts only the sent ones", tool: write,
			in: jobs.PolicyInput{Class: jobs.Throttled, Attempt: 6, Unsent: 3}, want: models.StatePending, wantNextAt: testNow.Add(100 * time.Millisecond)},
		{name: "the fourth sent attempt after not_sent ones is exhausted", tool: write,
			in: jobs.PolicyInput{Class: jobs.Throttled, Attempt: 7, Unsent: 3}, want: models.StateFailedFinal, wantClass: models.ErrorRetriesExhausted},
		{name: "exhausted after only throttled fails retries_exhausted", tool: write,
			in: jobs.PolicyInput{Class: jobs.Throttled, Attempt: 4, RetryAfter: time.Second}, want: models.StateFailedFinal, wantClass: models.ErrorRetriesExhausted},
		{name: "exhausted after an earlier ambiguous goes UNKNOWN", tool: writeKeys,
			in: jobs.PolicyInput{Class: jobs.NotSent, Attempt: 4, HadAmbiguous: true, Age: time.Hour}, want: models.StateUnknown, wantClass: models.ErrorAmbiguous},
		{name: "exhausted on an ambiguous attempt goes UNKNOWN", tool: writeKeys,
			in: jobs.PolicyInput{Class: jobs.Ambiguous, Attempt: 4}, want: models.StateUnknown, wantClass: models.ErrorAmbiguous},
		{name: "attempt past max_attempts counts as exhausted", tool: write,
			in: jobs.PolicyInput{Class: jobs.Throttled, Attempt: 9}, want: models.StateFailedFinal, wantClass: models.ErrorRetriesExhausted},
		{name: "throttled with Retry-After waits exactly that long", tool: write,
			in: jobs.PolicyInput{Class: jobs.Throttled, Attempt: 1, RetryAfter: 2 * time.Second}, want: models.StatePending, wantNextAt: testNow.Add(2 * time.Second)},
		{name: "throttled Retry-After is capped by max_backoff", tool: write,
			in: jobs.PolicyInput{Class: jobs.Throttled, Attempt: 1, RetryAfter: time.Hour}, want: models.StatePending, wantNextAt: testNow.Add(5 * time.Second)},
		{name: "throttled Retry-After shorter than initial_backoff is honoured", tool: write,
			in: jobs.PolicyInput{Class: jobs.Throttled, Attempt: 3, RetryAfter: 10 * time.Millisecond}, want: models.StatePending, wantNextAt: testNow.Add(10 * time.Millisecond)},
		{name: "throttled without Retry-After backs off", tool: write,
			in: jobs.PolicyInput{Class: jobs.Throttled, Attempt: 1}, want: models.StatePending, wantNextAt: testNow.Add(100 * time.Millisecond)},
		{name: "not_sent held while the downstream is known down waits until it may be up", tool: write,
			in: jobs.PolicyInput{Class: jobs.NotSent, Attempt: 1, RetryAfter: 3 * time.Second}, want: models.StatePending, wantNextAt: testNow.Add(3 * time.Second)},
		{name: "not_sent held longer than max_backoff waits max_backoff", tool: write,
			in: jobs.PolicyInput{Class: jobs.NotSent, Attempt: 1, RetryAfter: time.Hour}, want: models.StatePending, wantNextAt: testNow.Add(5 * time.Second)},
		{name: "rejected is final even with attempts left", tool: writeKeys,
			in: jobs.PolicyInput{Class: jobs.Rejected, Attempt: 1}, want: models.StateFailedFinal, wantClass: models.ErrorRejected},
		{name: "rejected after an ambiguous attempt is still unknown", tool: writeKeys,
			in: jobs.PolicyInput{Class: jobs.Rejected, Attempt: 2, HadAmbiguous: true}, want: models.StateUnknown, wantClass: models.ErrorAmbiguous},
		{name: "succeeded after an ambiguous attempt is a success", tool: write,
			in: jobs.PolicyInput{Class: jobs.Succeeded, Attempt: 4, HadAmbiguous: true}, want: models.StateSucceeded},
		{name: "a single allowed attempt that was not sent is retried within unsent_for", tool: catalog.Tool{Effect: catalog.EffectWrite,
			Retry: catalog.RetryPolicy{MaxAttempts: 1, InitialBackoff: time.Second, MaxBackoff: time.Second, UnsentFor: time.Minute}},
			in: jobs.PolicyInput{Class: jobs.NotSent, Attempt: 1}, want: models.StatePending, wantNextAt: testNow.Add(time.Second)},
		{name: "unsent_for 0: a not_sent attempt is exhausted at once", tool: catalog.Tool{Effect: catalog.EffectWrite,
			Retry: catalog.RetryPolicy{MaxAttempts: 1, InitialBackoff: time.Second, MaxBackoff: time.Second}},
			in: jobs.PolicyInput{Class: jobs.NotSent, Attempt: 1}, want: models.StateFailedFinal, wantClass: models.ErrorRetriesExhausted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.RetrySafe, in.Retry, in.Now = tc.tool.RetrySafe(), tc.tool.Retry, testNow
			got := jobs.Decide(in)
			assert.Equal(t, jobs.Decision{To: tc.want, ErrorClass: tc.wantClass, NextAttemptAt: tc.wantNextAt}, got)
		})
	}
}

// TestRetrySafe checks the catalogue's half of the ambiguous-retry rule on its own.
func TestRetrySafe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		effect catalog.Effect
		keys   bool
		want   bool
	}{
		{catalog.EffectRead, false, true}, {catalog.EffectRead, true, true},
		{catalog.EffectIdempotent, false, true}, {catalog.EffectIdempotent, true, true},
		{catalog.EffectWrite, false, false}, {catalog.EffectWrite, true, true},
	} {
		tool := toolFor(tc.effect, tc.keys)
		assert.Equal(t, tc.want, tool.RetrySafe(), "%s keys=%t", tc.effect, tc.keys)
	}
}

// TestBackoffStaysWithinBounds checks every delay lies in [initial_backoff, max_backoff] for
// any attempt and any jitter, including jitter outside [0, 1].
func TestBackoffStaysWithinBounds(t *testing.T) {
	t.Parallel()
	policies := []catalog.RetryPolicy{
		testPolicy,
		{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Hour},
		{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Second},
		{MaxAttempts: 3, InitialBackoff: 3 * time.Millisecond, MaxBackoff: 10 * time.Millisecond},
	}
	for _, p := range policies {
		for n := -1; n <= 200; n++ {
			for _, j := range []float64{-1, 0, 0.25, 0.5, 0.999999, 1, 2} {
				d := jobs.Backoff(p, n, j)
				require.GreaterOrEqual(t, d, p.InitialBackoff, "policy %+v n=%d jitter=%v", p, n, j)
				require.LessOrEqual(t, d, p.MaxBackoff, "policy %+v n=%d jitter=%v", p, n, j)
			}
		}
	}
}

// TestBackoffGrowsWithAttempts checks the ceiling doubles per attempt until max_backoff, and
// that for a fixed jitter the delay never shrinks as attempts go on.
func TestBackoffGrowsWithAttempts(t *testing.T) {
	t.Parallel()
	p := catalog.RetryPolicy{MaxAttempts: 10, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second}
	wantCeilings := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i, want := range wantCeilings {
		assert.Equal(t, want*time.Millisecond, jobs.Backoff(p, i+1, 1), "ceiling after attempt %d", i+1)
	}
	for _, j := range []float64{0.1, 0.5, 0.9} {
		prev := time.Duration(0)
		for n := 1; n <= 20; n++ {
			d := jobs.Backoff(p, n, j)
			assert.GreaterOrEqual(t, d, prev, "jitter %v attempt %d", j, n)
			prev = d
		}
		assert.Greater(t, jobs.Backoff(p, 4, j), jobs.Backoff(p, 1, j), "jitter %v: later attempts wait longer", j)
	}
}

// TestBackoffJitterBounds checks the two ends of the full-jitter draw.
func TestBackoffJitterBounds(t *testing.T) {
	t.Parallel()
	p := testPolicy
	for n := 1; n <= 10; n++ {
		assert.Equal(t, p.InitialBackoff, jobs.Backoff(p, n, 0), "jitter 0 waits initial_backoff (attempt %d)", n)
	}
	// A draw just under 1 lands within a nanosecond-scale rounding of the ceiling.
	assert.InDelta(t, float64(800*time.Millisecond), float64(jobs.Backoff(p, 4, math.Nextafter(1, 0))), float64(time.Microsecond))
	assert.Equal(t, 800*time.Millisecond, jobs.Backoff(p, 4, 1))
	assert.Equal(t, 450*time.Millisecond, jobs.Backoff(p, 4, 0.5), "halfway between 100ms and 800ms")
}

// TestBackoffHugeAttemptDoesNotOverflow checks that absurd attempt numbers still give a delay
// within bounds and return at once.
func TestBackoffHugeAttemptDoesNotOverflow(t *testing.T) {
	t.Parallel()
	for _, n := range []int{63, 64, 65, 1 << 20, math.MaxInt32, math.MaxInt} {
		for _, j := range []float64{0, 0.5, 1} {
			d := jobs.Backoff(testPolicy, n, j)
			assert.GreaterOrEqual(t, d, testPolicy.InitialBackoff, "n=%d", n)
			assert.LessOrEqual(t, d, testPolicy.MaxBackoff, "n=%d", n)
		}
	}
}

// TestBackoffHugeMaxBackoffDoesNotOverflow checks the doubling cannot wrap when max_backoff is
// close to the largest duration. The catalogue only requires max_backoff to be positive, so
// "max_backoff: 2562047h" is a valid tools file.
func TestBackoffHugeMaxBackoffDoesNotOverflow(t *testing.T) {
	t.Parallel()
	p := catalog.RetryPolicy{MaxAttempts: 100, InitialBackoff: time.Second, MaxBackoff: time.Duration(math.MaxInt64)}
	for n := 1; n <= 100; n++ {
		d := jobs.Backoff(p, n, 0.5)
		require.GreaterOrEqual(t, d, p.InitialBackoff, "attempt %d", n)
		require.LessOrEqual(t, d, p.MaxBackoff, "attempt %d", n)
	}
}

// errTransport stands for any transport failure.
var errTransport = errors.New("connection reset by peer")

// TestClassify maps what the connector saw to a class, over the statuses of docs/STATES.md.
func TestClassify(t *testing.T) {
	t.Parallel()
	bodyErr := errors.New("unexpected EOF")
	tests := []struct {
		name         string
		status       int
		wrote        bool
		transportErr error
		bodyErr      error
		want         jobs.Class
	}{
		{"200 succeeded", 200, true, nil, nil, jobs.Succeeded},
		{"201 succeeded", 201, true, nil, nil, jobs.Succeeded},
		{"204 succeeded", 204, true, nil, nil, jobs.Succeeded},
		{"299 succeeded", 299, true, nil, nil, jobs.Succeeded},
		{"200 with unreadable body is ambiguous", 200, true, nil, bodyErr, jobs.Ambiguous},
		{"201 with unreadable body is ambiguous", 201, true, nil, bodyErr, jobs.Ambiguous},
		{"301 is not followed and ambiguous", 301, true, nil, nil, jobs.Ambiguous},
		{"302 is not followed and ambiguous", 302, true, nil, nil, jobs.Ambiguous},
		{"400 rejected", 400, true, nil, nil, jobs.Rejected},
		{"404 rejected", 404, true, nil, nil, jobs.Rejected},
		{"409 rejected", 409, true, nil, nil, jobs.Rejected},
		{"422 rejected", 422, true, nil, nil, jobs.Rejected},
		{"422 with unreadable body is still rejected", 422, true, nil, bodyErr, jobs.Rejected},
		{"429 throttled", 429, true, nil, nil, jobs.Throttled},
		{"500 ambiguous", 500, true, nil, nil, jobs.Ambiguous},
		{"501 ambiguous (the conservative reading)", 501, true, nil, nil, jobs.Ambiguous},
		{"502 ambiguous", 502, true, nil, nil, jobs.Ambiguous},
		{"503 throttled", 503, true, nil, nil, jobs.Throttled},
		{"504 ambiguous", 504, true, nil, nil, jobs.Ambiguous},
		{"100 ambiguous", 100, true, nil, nil, jobs.Ambiguous},
		{"transport error before the request was written is not_sent", 0, false, errTransport, nil, jobs.NotSent},
		{"transport error after the request was written is ambiguous", 0, true, errTransport, nil, jobs.Ambiguous},
		{"timeout after the request was written is ambiguous", 0, true, fmt.Errorf("Post: %w", os.ErrDeadlineExceeded), nil, jobs.Ambiguous},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, jobs.Classify(tc.status, tc.wrote, tc.transportErr, tc.bodyErr))
		})
	}
}
