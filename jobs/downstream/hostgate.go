package downstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// A downstream that cannot be reached must not burn operations or goroutines (issue 48: an
// outage of a few seconds ended every new operation FAILED_FINAL, and up to 363 connection
// attempts to one host were pending at once). Every dial goes through the host's gate:
//
//   - at most dialsPerHost connection attempts to one host are in flight; the others wait
//     for a turn within their call's timeout (and send nothing if it ends first);
//   - after failsToOpen failed connection attempts in a row the host is known down: new
//     attempts fail at once, without a dial, with a HostDownError saying until when (the
//     circuit is open). The executor holds such an operation PENDING until then (answered
//     202), and the attempt counts against retry.unsent_for, not max_attempts.
//   - once that time has passed, connection attempts are made again (within the in-flight
//     bound); one that connects closes the circuit, and another failure opens it again for
//     twice as long, up to maxHold.
const (
	dialsPerHost = 4
	failsToOpen  = 3
	firstHold    = 500 * time.Millisecond
	maxHold      = 5 * time.Second
	// dialTimeout bounds a connection attempt, and the wait for its turn.
	dialTimeout = 30 * time.Second
)

// HostDownError is a connection attempt refused by the gate: the host is known down.
type HostDownError struct {
	Host  string
	Until time.Time // when connection attempts are made again
	Fails int       // failed connection attempts in a row
}

func (e *HostDownError) Error() string {
	return fmt.Sprintf("%s is known down (%d connection attempts in a row failed); nothing is sent to it until %s",
		e.Host, e.Fails, e.Until.UTC().Format(time.RFC3339Nano))
}

// hostGates holds the gate of every host a connector has dialled.
type hostGates struct {
	mu    sync.Mutex
	hosts map[string]*hostGate
	now   func() time.Time
}

func newHostGates() *hostGates {
	return &hostGates{hosts: map[string]*hostGate{}, now: time.Now}
}

// hostGate is one host's circuit and its bound on connection attempts in flight.
type hostGate struct {
	turns chan struct{}
	mu    sync.Mutex
	fails int
	until time.Time // open while now is before it
	hold  time.Duration
}

func (gs *hostGates) gate(addr string) *hostGate {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.hosts[addr]
	if !ok {
		g = &hostGate{turns: make(chan struct{}, dialsPerHost)}
		gs.hosts[addr] = g
	}
	return g
}

// dial runs dial to addr through addr's gate. Go's transport detaches a dial from the request
// that asked for it (so that a later request may use the connection); here the wait for a turn
// and the connection attempt end when that request's call gives up, so a host that does not
// answer leaves no pile of pending dials behind its callers.
func (gs *hostGates) dial(ctx context.Context, network, addr string, dial func(context.Context, string, string) (net.Conn, error)) (net.Conn, error) {
	if a := attemptFrom(ctx); a != nil && !a.deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, a.deadline)
		defer cancel()
	}
	g := gs.gate(addr)
	if err := g.open(addr, gs.now()); err != nil {
		return nil, err
	}
	wait := time.NewTimer(dialTimeout)
	defer wait.Stop()
	select {
	case g.turns <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a connection attempt to %s: %w", addr, ctx.Err())
	case <-wait.C:
		return nil, fmt.Errorf("waiting for a connection attempt to %s: %d already in flight for %s", addr, dialsPerHost, dialTimeout)
	}
	defer func() { <-g.turns }()
	// The circuit may have opened while this call waited for its turn.
	if err := g.open(addr, gs.now()); err != nil {
		return nil, err
	}
	c, err := dial(ctx, network, addr)
	g.record(err, gs.now())
	return c, err
}

// open returns a HostDownError while the circuit is open.
func (g *hostGate) open(addr string, now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Before(g.until) {
		return &HostDownError{Host: addr, Until: g.until, Fails: g.fails}
	}
	return nil
}

// record counts a connection attempt's result.
func (g *hostGate) record(err error, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		g.fails, g.until, g.hold = 0, time.Time{}, 0
		return
	}
	if errors.Is(err, context.Canceled) {
		return // the caller gave up; says nothing of the host
	}
	g.fails++
	if g.fails < failsToOpen {
		return
	}
	if g.hold == 0 {
		g.hold = firstHold
	} else {
		g.hold = min(2*g.hold, maxHold)
	}
	g.until = now.Add(g.hold)
}
