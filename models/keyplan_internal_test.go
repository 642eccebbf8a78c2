package models

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The key look-up is planned per run while the statistics say the table is young, reads them
// at most once per recheck, keeps being careful when they cannot be read, and stops for good
// once they show settledRows rows.
func TestKeyPlanPerRunWhileYoung(t *testing.T) {
	var k keyPlan
	reads, rows := 0, -1.0
	var fail error
	read := func(context.Context) (float64, error) {
		reads++
		return rows, fail
	}
	t0 := time.Unix(1_800_000_000, 0)
	ctx := context.Background()

	assert.True(t, k.perRun(ctx, t0, read), "never analyzed: per run")
	assert.Equal(t, 1, reads)
	assert.True(t, k.perRun(ctx, t0.Add(keyPlanRecheck/2), read), "still young")
	assert.Equal(t, 1, reads, "the statistics are not read again before the recheck")

	rows = settledRows - 1
	assert.True(t, k.perRun(ctx, t0.Add(keyPlanRecheck), read), "below the threshold: per run")
	assert.Equal(t, 2, reads)

	rows, fail = settledRows, errors.New("connection reset")
	assert.True(t, k.perRun(ctx, t0.Add(2*keyPlanRecheck), read), "unreadable statistics: careful")
	assert.Equal(t, 3, reads)

	fail = nil
	assert.False(t, k.perRun(ctx, t0.Add(3*keyPlanRecheck), read), "settled: the cached plan")
	assert.False(t, k.perRun(ctx, t0.Add(3*keyPlanRecheck+time.Nanosecond), read))
	assert.False(t, k.perRun(ctx, t0.Add(10*keyPlanRecheck), read))
	assert.Equal(t, 4, reads, "settled is for good: no more reads")
}
