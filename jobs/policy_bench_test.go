package jobs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemgate/idemgate/jobs"
)

// Sinks keep the compiler from dropping the benchmarked calls; typed, so that storing a
// result allocates nothing.
var (
	classSink    jobs.Class
	decisionSink jobs.Decision
)

// BenchmarkClassify is the classifier over the outcomes an attempt can have.
func BenchmarkClassify(b *testing.B) {
	reset := errors.New("connection reset by peer")
	cases := []struct {
		status      int
		wrote       bool
		transport   error
		body        error
		description string
	}{
		{201, true, nil, nil, "success"},
		{422, true, nil, nil, "rejection"},
		{503, true, nil, nil, "throttled"},
		{0, true, reset, nil, "lost after sending"},
		{0, false, reset, nil, "never sent"},
		{200, true, nil, reset, "body cut short"},
	}
	b.ReportAllocs()
	for i := range b.N {
		c := cases[i%len(cases)]
		classSink = jobs.Classify(c.status, c.wrote, c.transport, c.body)
	}
}

// BenchmarkDecide is the retry policy's decision after a retryable failure.
func BenchmarkDecide(b *testing.B) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for i := range b.N {
		decisionSink = jobs.Decide(jobs.PolicyInput{Class: jobs.Throttled, Attempt: 1 + i%3, RetrySafe: true,
			Retry: testPolicy, Now: now, Jitter: 0.5})
	}
}
