package groupcommit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/groupcommit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gate is a run function that records each batch and holds it until released.
type gate struct {
	mu      sync.Mutex
	batches [][]int
	started chan int      // a batch's size, when it starts
	release chan struct{} // one receive lets one batch finish
}

func newGate() *gate {
	return &gate{started: make(chan int, 100), release: make(chan struct{}, 100)}
}

func (g *gate) run(_ context.Context, reqs []int, out []int) {
	g.mu.Lock()
	g.batches = append(g.batches, append([]int(nil), reqs...))
	g.mu.Unlock()
	g.started <- len(reqs)
	<-g.release
	for i, r := range reqs {
		out[i] = r * 10
	}
}

func TestAnIdleRequestRunsAtOnceAlone(t *testing.T) {
	g := newGate()
	g.release <- struct{}{}
	b := groupcommit.New(1, 8, g.run)
	res, err := b.Do(t.Context(), 7)
	require.NoError(t, err)
	assert.Equal(t, 70, res)
	assert.Equal(t, [][]int{{7}}, g.batches)
}

// While the only slot is busy, requests queue; the slot's next batch takes them together, up to
// the bound, and each is answered with its own result.
func TestRequestsThatWaitShareTheNextBatch(t *testing.T) {
	g := newGate()
	b := groupcommit.New(1, 3, g.run)
	results := make([]int, 6)
	var wg sync.WaitGroup
	do := func(i int) {
		defer wg.Done()
		res, err := b.Do(t.Context(), i)
		assert.NoError(t, err)
		results[i] = res
	}
	wg.Add(1)
	go do(0)
	require.Equal(t, 1, <-g.started) // the first runs alone: nothing was waiting
	for i := 1; i < 6; i++ {
		wg.Add(1)
		go do(i)
	}
	require.Eventually(t, func() bool { return b.Queued() == 5 }, 5*time.Second, time.Millisecond)
	g.release <- struct{}{}
	assert.Equal(t, 3, <-g.started, "the next batch takes the waiting requests, up to its bound")
	g.release <- struct{}{}
	assert.Equal(t, 2, <-g.started)
	g.release <- struct{}{}
	wg.Wait()
	assert.Equal(t, []int{0, 10, 20, 30, 40, 50}, results)
	assert.Len(t, g.batches, 3)
}

func TestACancelledWaitingRequestNeverRuns(t *testing.T) {
	g := newGate()
	b := groupcommit.New(1, 8, g.run)
	go func() { _, _ = b.Do(context.Background(), 1) }()
	<-g.started
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := b.Do(ctx, 2)
		done <- err
	}()
	require.Eventually(t, func() bool { return b.Queued() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	g.release <- struct{}{}
	// The slot is free again and nothing else ran: request 2 was withdrawn.
	g.release <- struct{}{}
	res, err := b.Do(t.Context(), 3)
	require.NoError(t, err)
	assert.Equal(t, 30, res)
	assert.Equal(t, [][]int{{1}, {3}}, g.batches)
}

// Many goroutines at once, more than the slots: every request is answered once, with its own
// result, and no batch passes its bound.
func TestEveryRequestIsAnsweredWithItsOwnResult(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	b := groupcommit.New(2, 16, func(_ context.Context, reqs []int, out []int) {
		mu.Lock()
		sizes = append(sizes, len(reqs))
		mu.Unlock()
		time.Sleep(time.Millisecond) // long enough for others to queue
		for i, r := range reqs {
			out[i] = -r
		}
	})
	const n = 2000
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.Do(t.Context(), i)
			assert.NoError(t, err)
			assert.Equal(t, -i, res)
		}()
	}
	wg.Wait()
	total, batched := 0, false
	for _, s := range sizes {
		assert.LessOrEqual(t, s, 16)
		total += s
		batched = batched || s > 1
	}
	assert.Equal(t, n, total, "each request ran exactly once")
	assert.True(t, batched, "with 2,000 at once some requests shared a batch")
}

// Paused, a batcher queues even an idle request; resumed, the queue goes as one batch.
func TestPausedRequestsGoTogetherOnResume(t *testing.T) {
	g := newGate()
	b := groupcommit.New(2, 8, g.run)
	resume := b.Pause()
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.Do(t.Context(), i)
			assert.NoError(t, err)
			assert.Equal(t, i*10, res)
		}()
	}
	require.Eventually(t, func() bool { return b.Queued() == 5 }, 5*time.Second, time.Millisecond)
	assert.Empty(t, g.batches, "nothing ran while paused")
	g.release <- struct{}{}
	resume()
	assert.Equal(t, 5, <-g.started)
	wg.Wait()
	batches, requests := b.Stats()
	assert.Equal(t, uint64(1), batches)
	assert.Equal(t, uint64(5), requests)
}
