// Package groupcommit gathers requests that arrive together into batches, so that work which
// costs the same for one request as for many (a database statement, a commit) is paid once
// for all of them.
//
// It never waits for a batch to fill. A request that finds a free slot runs at once, alone:
// an idle gateway's latency is what it was without batching. Only while every slot is busy do
// requests queue, and the next slot to free takes all of them (up to the batch's bound)
// together. The window is therefore the time a batch takes, and it adapts to load by itself:
// none when idle, one round trip's worth under load.
package groupcommit

import (
	"context"
	"sync"
	"sync/atomic"
)

// Batcher runs requests of type Req in batches through its run function, which answers each
// with a Res. It is safe for concurrent use.
type Batcher[Req, Res any] struct {
	run      func(ctx context.Context, reqs []Req, out []Res)
	maxBatch int
	slots    int

	mu     sync.Mutex
	busy   int  // slots running a batch
	paused bool // Pause: no batch starts
	queue  []*waiter[Req, Res]

	batches, requests atomic.Uint64 // run so far (Stats)
}

// waiter is one request waiting for its answer or for its turn to run the next batch.
type waiter[Req, Res any] struct {
	ctx context.Context
	req Req
	res Res
	// wake is sent true when this request is to run batch (it leads it), false when res is set.
	wake  chan bool
	batch []*waiter[Req, Res]
}

// New returns a batcher that runs at most slots batches at once, each of at most maxBatch
// requests. run must set out[i] for every reqs[i] and must not keep either slice; it runs on
// the goroutine of one of the batch's requests, with that request's context values but not its
// cancellation (the batch answers others too).
func New[Req, Res any](slots, maxBatch int, run func(ctx context.Context, reqs []Req, out []Res)) *Batcher[Req, Res] {
	return &Batcher[Req, Res]{run: run, slots: max(1, slots), maxBatch: max(1, maxBatch)}
}

// Do runs req in a batch and returns its answer. It fails only when ctx ends while req is still
// queued, before any batch took it: then it was never run. Once taken, it is answered whatever
// becomes of ctx, since the batch may already have done its work.
func (b *Batcher[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	w := &waiter[Req, Res]{ctx: ctx, req: req, wake: make(chan bool, 1)}
	b.mu.Lock()
	if b.busy < b.slots && !b.paused {
		b.busy++
		b.mu.Unlock()
		b.lead([]*waiter[Req, Res]{w})
		return w.res, nil
	}
	b.queue = append(b.queue, w)
	b.mu.Unlock()

	var lead bool
	select {
	case lead = <-w.wake:
	case <-ctx.Done():
		if b.withdraw(w) {
			var zero Res
			return zero, ctx.Err()
		}
		lead = <-w.wake // already taken: its batch answers it
	}
	if lead {
		b.lead(w.batch)
	}
	return w.res, nil
}

// withdraw takes w out of the queue, and reports whether it was still there.
func (b *Batcher[Req, Res]) withdraw(w *waiter[Req, Res]) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, q := range b.queue {
		if q == w {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			return true
		}
	}
	return false
}

// lead runs batch, whose first request is the caller's, answers the others, and hands the slot
// to the next batch of queued requests, or frees it.
func (b *Batcher[Req, Res]) lead(batch []*waiter[Req, Res]) {
	reqs := make([]Req, len(batch))
	for i, w := range batch {
		reqs[i] = w.req
	}
	out := make([]Res, len(batch))
	b.batches.Add(1)
	b.requests.Add(uint64(len(batch)))
	b.run(context.WithoutCancel(batch[0].ctx), reqs, out)
	for i, w := range batch {
		w.res = out[i]
		if i > 0 {
			w.wake <- false
		}
	}

	b.mu.Lock()
	b.busy--
	b.startQueued()
	b.mu.Unlock()
}

// startQueued hands each free slot to a batch of the queued requests, taken in their order:
// the first request of each runs it, on its own goroutine. b.mu is held.
func (b *Batcher[Req, Res]) startQueued() {
	for len(b.queue) > 0 && b.busy < b.slots && !b.paused {
		n := min(len(b.queue), b.maxBatch)
		next := make([]*waiter[Req, Res], n)
		copy(next, b.queue[:n])
		b.queue = append(b.queue[:0], b.queue[n:]...)
		b.busy++
		next[0].batch = next
		next[0].wake <- true
	}
}

// Pause holds every request that arrives from now on in the queue, until resume is called;
// batches already running finish. With it a test makes requests share one batch.
func (b *Batcher[Req, Res]) Pause() (resume func()) {
	b.mu.Lock()
	b.paused = true
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.paused = false
		b.startQueued()
	}
}

// Stats says how many batches ran so far, and how many requests they held.
func (b *Batcher[Req, Res]) Stats() (batches, requests uint64) {
	return b.batches.Load(), b.requests.Load()
}

// Queued says how many requests wait for a slot (for tests and metrics).
func (b *Batcher[Req, Res]) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}
