package downstream

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHostGateOpensAfterFailuresInARow: failsToOpen failed connection attempts in a row make
// the host known down: the next attempt fails at once with a HostDownError and no dial; once
// the hold has passed a dial is tried again, a failure holds twice as long, and a connection
// closes the circuit.
func TestHostGateOpensAfterFailuresInARow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	gs := newHostGates()
	gs.now = func() time.Time { return now }
	var dials int
	up := false
	dial := func(context.Context, string, string) (net.Conn, error) {
		dials++
		if up {
			c, _ := net.Pipe()
			return c, nil
		}
		return nil, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
	}
	ctx := context.Background()
	for i := range failsToOpen {
		_, err := gs.dial(ctx, "tcp", "pay.example:443", dial)
		require.Error(t, err)
		var down *HostDownError
		require.False(t, errors.As(err, &down), "attempt %d is a real one", i+1)
	}
	require.Equal(t, failsToOpen, dials)

	_, err := gs.dial(ctx, "tcp", "pay.example:443", dial)
	var down *HostDownError
	require.ErrorAs(t, err, &down)
	assert.Equal(t, now.Add(firstHold), down.Until)
	assert.Equal(t, failsToOpen, dials, "held: no dial")
	_, err = gs.dial(ctx, "tcp", "other.example:443", dial)
	assert.False(t, errors.As(err, &down), "another host has a gate of its own")

	now = now.Add(firstHold)
	_, err = gs.dial(ctx, "tcp", "pay.example:443", dial)
	require.Error(t, err)
	assert.False(t, errors.As(err, &down), "once the hold passed, a real attempt")
	_, err = gs.dial(ctx, "tcp", "pay.example:443", dial)
	require.ErrorAs(t, err, &down)
	assert.Equal(t, now.Add(2*firstHold), down.Until, "held twice as long")

	now, up = down.Until, true
	c, err := gs.dial(ctx, "tcp", "pay.example:443", dial)
	require.NoError(t, err)
	c.Close()
	up = false
	_, err = gs.dial(ctx, "tcp", "pay.example:443", dial)
	assert.False(t, errors.As(err, &down), "a connection closed the circuit: failures count from zero")
}

// TestHostGateBoundsConnectionAttemptsInFlight: however many calls want a connection to one
// host at once, at most dialsPerHost connection attempts to it are in flight; a call whose
// context ends while it waits for a turn sends nothing.
func TestHostGateBoundsConnectionAttemptsInFlight(t *testing.T) {
	t.Parallel()
	gs := newHostGates()
	release := make(chan struct{})
	var inFlight, most atomic.Int32
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		n := inFlight.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		defer inFlight.Add(-1)
		<-release
		c, _ := net.Pipe()
		return c, nil
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := gs.dial(context.Background(), "tcp", "slow.example:443", dial)
			if assert.NoError(t, err) {
				c.Close()
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for inFlight.Load() < dialsPerHost && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := gs.dial(ctx, "tcp", "slow.example:443", dial)
	assert.ErrorIs(t, err, context.Canceled, "no turn: nothing sent")
	close(release)
	wg.Wait()
	assert.Equal(t, int32(dialsPerHost), most.Load())
}
