package models

import (
	"context"
	"sync"
	"time"
)

// Deadlines on the ledger (docs/OPERATIONS.md, "When the ledger is unreachable"). A request
// the gateway serves must not hang on a PostgreSQL that went away: every ledger call it makes
// (taking a connection from the pool, the statements, the commit) ends within RequestDeadline,
// and past it the request answers 503 ledger-unavailable with Retry-After (a write whose
// commit was cut off says it may have been recorded). The deadline is per call, not per
// request, so that a long request that keeps reaching the ledger (an export streaming page
// after page, a wait for an outcome that polls) is not cut; a request that cannot reach it
// ends at its first call. Background jobs have deadlines of their own.

// DefaultRequestDeadline bounds each ledger call of a request (serve --ledger-deadline).
const DefaultRequestDeadline = 5 * time.Second

// readyTimeout bounds the readiness probe: /readyz answers within it.
const readyTimeout = 1500 * time.Millisecond

type requestMarkKey struct{}

// MarkRequest marks ctx as a request's: every ledger call made with it ends within the
// ledger's RequestDeadline.
func MarkRequest(ctx context.Context) context.Context {
	return context.WithValue(ctx, requestMarkKey{}, true)
}

// RequestDeadline is how long each ledger call of a request may take.
func (l *Ledger) RequestDeadline() time.Duration { return l.deadline }

// deadlineOf is when a ledger call made now with ctx must end; false when ctx is no request's
// or already ends sooner, or on SQLite: a ledger in a local file cannot go out of reach, and a
// request that waits there waits for other requests (a storm of a thousand duplicates queues
// for its few connections), which must not turn into 503s.
func (l *Ledger) deadlineOf(ctx context.Context) (time.Time, bool) {
	if marked, _ := ctx.Value(requestMarkKey{}).(bool); !marked || l.deadline <= 0 || l.dialect != Postgres {
		return time.Time{}, false
	}
	at := time.Now().Add(l.deadline)
	if d, has := ctx.Deadline(); has && !d.After(at) {
		return time.Time{}, false
	}
	return at, true
}

// bound is ctx limited to a request's ledger deadline; cancel releases it.
func (l *Ledger) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	at, ok := l.deadlineOf(ctx)
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, at)
}

// bounded is bound for a read whose handle outlives this call (a *gorm.DB the caller chains
// on): the context's timer is released when it ends, at the deadline or with the request.
func (l *Ledger) bounded(ctx context.Context) context.Context {
	at, ok := l.deadlineOf(ctx)
	if !ok {
		return ctx
	}
	bctx, cancel := context.WithDeadline(ctx, at)
	context.AfterFunc(bctx, cancel)
	return bctx
}

// batchTimeout bounds a group-commit batch's statement: groupCommitTimeout, or the request
// deadline when that is shorter, since a batch of claims answers requests that must end within
// it.
func (l *Ledger) batchTimeout() time.Duration {
	if l.deadline > 0 {
		return min(groupCommitTimeout, l.deadline)
	}
	return groupCommitTimeout
}

// readiness remembers whether the ledger answered its last probe, so that /readyz answers
// within readyTimeout, and within downWait while the ledger is known to be down: a load
// balancer's probes then neither pile up nor wait out a partition.
type readiness struct {
	mu      sync.Mutex
	down    error // the last probe's failure, nil when it passed
	probing bool
	done    chan struct{} // closed when the running probe ends
}

// downWait is how long a readiness check waits for its probe while the last one failed.
const downWait = 500 * time.Millisecond

// ready runs probe, at most one at a time (a caller arriving while one runs waits for that
// one), and waits for it up to readyTimeout, or downWait while the last probe failed: then, if
// the probe has not answered by that time, the answer is the last failure, and the probe goes
// on in the background.
func (r *readiness) ready(ctx context.Context, probe func(context.Context) error) error {
	r.mu.Lock()
	if !r.probing {
		r.start(probe)
	}
	done, known := r.done, r.down
	r.mu.Unlock()
	wait := readyTimeout
	if known != nil {
		wait = downWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		if known != nil {
			return known
		}
		return errorf(CodeUnavailable, "ledger: no answer within %s", readyTimeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.down
}

// start runs probe in the background; r.mu is held.
func (r *readiness) start(probe func(context.Context) error) {
	r.probing = true
	r.done = make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		err := probe(ctx)
		cancel()
		r.mu.Lock()
		r.down, r.probing = err, false
		close(r.done)
		r.mu.Unlock()
	}()
}
