package models

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func terminalOp(i int) *Operation {
	result := `{"id":"R-1"}`
	return &Operation{ID: fmt.Sprintf("op_%d", i), Tenant: "acme", Key: fmt.Sprintf("k-%d", i), State: StateSucceeded, Result: &result}
}

// A look-up that began before an invalidation cannot put what it read back afterwards.
func TestReplayCachePutAfterForgetIsRefused(t *testing.T) {
	c := newReplayCache(1 << 20)
	c.setLive(true)
	op := terminalOp(1)
	_, gen := c.get("acme", op.Key) // the look-up begins
	c.forget(op.ID)                 // a compensation's notification arrives meanwhile
	c.put(gen, op)                  // the look-up's old answer
	got, _ := c.get("acme", op.Key)
	assert.Nil(t, got)

	_, gen = c.get("acme", op.Key)
	c.put(gen, op)
	got, _ = c.get("acme", op.Key)
	require.NotNil(t, got)
	got.State = StateFailedFinal
	again, _ := c.get("acme", op.Key)
	assert.Equal(t, StateSucceeded, again.State, "callers get copies")
}

// The cache stays within its budget, dropping the least recently used; it keeps nothing
// while not live, and nothing that may still change.
func TestReplayCacheBoundsAndEligibility(t *testing.T) {
	c := newReplayCache(10 * 1100)
	_, gen := c.get("acme", "k-0")
	c.put(gen, terminalOp(0))
	got, _ := c.get("acme", "k-0")
	assert.Nil(t, got, "not live: nothing kept")

	c.setLive(true)
	for i := range 30 {
		_, gen := c.get("acme", terminalOp(i).Key)
		c.put(gen, terminalOp(i))
		if i > 0 {
			c.get("acme", "k-1") // keep k-1 recently used
		}
	}
	assert.LessOrEqual(t, c.used, c.budget)
	assert.Len(t, c.entries, len(c.byID))
	first, _ := c.get("acme", "k-1")
	assert.NotNil(t, first, "recently used survives")
	early, _ := c.get("acme", "k-2")
	assert.Nil(t, early, "least recently used went")

	running := terminalOp(40)
	running.State = StateRunning
	review := terminalOp(41)
	review.ReviewID = ptr("rev_1")
	sealed := terminalOp(42)
	sealed.ParamsSealed = ptr("sealed")
	for _, op := range []*Operation{running, review, sealed} {
		_, gen := c.get("acme", op.Key)
		c.put(gen, op)
		got, _ := c.get("acme", op.Key)
		assert.Nil(t, got, op.Key)
	}
}

// A run of known keys turns Submit to reading first within a few misses, a run of new keys
// back; the score stays within its bounds however long a run lasts.
func TestMissGuessFollowsRecentMisses(t *testing.T) {
	var g missGuess
	if !g.likelyNew() {
		t.Fatal("a fresh ledger expects new keys")
	}
	for range 100 {
		g.saw(true)
	}
	if g.likelyNew() || g.score.Load() != -missGuessBound {
		t.Fatalf("after 100 known keys: score %d, want %d", g.score.Load(), -missGuessBound)
	}
	for range missGuessBound {
		g.saw(false)
	}
	if !g.likelyNew() {
		t.Fatalf("after %d new keys the guess is still 'known' (score %d)", missGuessBound, g.score.Load())
	}
	for range 100 {
		g.saw(false)
	}
	if g.score.Load() != missGuessBound {
		t.Fatalf("score %d, want %d", g.score.Load(), missGuessBound)
	}
}
