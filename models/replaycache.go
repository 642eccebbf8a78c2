package models

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// DefaultReplayCacheBytes bounds the memory the replay cache takes (Config.ReplayCacheBytes):
// about 50,000 operations of a kilobyte each.
const DefaultReplayCacheBytes = 64 << 20

// replayCacheMaxEntry is the largest operation the cache keeps: one whose params or result
// are bigger is read from the database each time, so one huge answer cannot evict thousands.
const replayCacheMaxEntry = 64 << 10

// replaysChannel carries the ids of terminal operations whose answer just changed (a
// compensation linked to one, params sealed), or "*" for many (a retention purge), so every
// replica drops them from its replay cache.
const replaysChannel = "idemgate_replays"

// forgetAll is the payload of a notification that drops every cached answer.
const forgetAll = "*"

// replayCache remembers terminal operations by (tenant, key), so that a replay, the common
// request under retries, is answered without asking the database.
//
// Why that is safe: a terminal operation's row never changes its state again (legal, in
// state.go, has no transition out of SUCCEEDED or FAILED_FINAL). What else can change the
// answer to a replay is, exhaustively:
//
//   - a compensation linked to the operation (linkCompensation sets compensated_by);
//   - a retention purge (Purge drops params and result, and the key then answers 410);
//   - sealing its params in place (params.go), which changes what is stored, not what is
//     answered, and is dropped all the same;
//   - the caller's permissions: authentication and the tool check run before the ledger is
//     asked (handlers), whether or not the answer comes from here, so a revoked key is
//     refused exactly as without the cache (see keyCache).
//
// The cache is filled by a replay's read, and by this process's own recording of a terminal
// outcome (FinishAttempt), whose operation is the row it committed.
//
// Each of the first three writes, in its own transaction, a notification on replaysChannel;
// every replica's listener drops what it names (this process's own too, and this process
// drops it again once its commit returns). Operations with a review are not kept (a review is
// a second row), nor those whose params are sealed (their clear params would sit in memory).
//
// A cache is only believed while a listener hears every notification: on PostgreSQL it is
// live from the moment the listener's LISTEN holds until that connection fails, and emptied
// at both ends, so that nothing learned before a gap in what it heard survives it. A process
// with no listener (a transaction pooler without a listen URL) or on SQLite, where no
// notification reaches the other processes that may share the file (a worker, the CLI),
// never uses it. Entries are written only by a look-up that began after the last
// invalidation (the generation check), so a read racing a change cannot put the old answer
// back after the change's notification removed it.
//
// What remains is the notification's delay: for the milliseconds between another replica's
// commit of a compensation and its notification's arrival here, a replay here answers as it
// would have just before that commit.
type replayCache struct {
	budget int64

	mu      sync.Mutex
	live    bool
	gen     uint64
	used    int64
	order   *list.List // of *replayEntry, most recently used first
	entries map[replayKey]*list.Element
	byID    map[string]*list.Element // the same elements, by operation id (notifications name ids)
}

type replayKey struct{ tenant, key string }

type replayEntry struct {
	key  replayKey
	op   Operation
	size int64
}

func newReplayCache(budget int64) *replayCache {
	return &replayCache{budget: budget, order: list.New(), entries: map[replayKey]*list.Element{}, byID: map[string]*list.Element{}}
}

// get returns a copy of the cached operation under (tenant, key), and the generation a look-up
// that misses must hand back to put.
func (c *replayCache) get(tenant, key string) (*Operation, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[replayKey{tenant, key}]
	if !ok {
		return nil, c.gen
	}
	c.order.MoveToFront(el)
	op := el.Value.(*replayEntry).op // a copy: callers may not change the cached one
	return &op, c.gen
}

// put remembers op, read by a look-up that began at generation gen, when it may be kept.
func (c *replayCache) put(gen uint64, op *Operation) {
	size, ok := replayable(op)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || gen != c.gen || c.budget <= 0 {
		return
	}
	k := replayKey{op.Tenant, op.Key}
	if el, ok := c.entries[k]; ok {
		c.remove(el)
	}
	if el, ok := c.byID[op.ID]; ok {
		c.remove(el)
	}
	el := c.order.PushFront(&replayEntry{key: k, op: *op, size: size})
	c.entries[k], c.byID[op.ID] = el, el
	c.used += size
	for c.used > c.budget {
		c.remove(c.order.Back())
	}
}

// replayable says whether op may be kept, and what it costs the budget.
func replayable(op *Operation) (int64, bool) {
	if !op.State.Terminal() || op.PurgedAt != nil || op.ReviewID != nil || op.ParamsSealed != nil {
		return 0, false
	}
	// The struct and its fixed fields, then what varies.
	size := int64(1024 + len(op.ID) + len(op.Tenant) + 2*len(op.Key) + len(op.Tool) + len(op.Fingerprint))
	for _, s := range []*string{op.Params, op.Result, op.UpstreamResult, op.ErrorMessage, op.Justification} {
		if s != nil {
			if len(*s) > replayCacheMaxEntry {
				return 0, false
			}
			size += int64(len(*s))
		}
	}
	return size, true
}

func (c *replayCache) remove(el *list.Element) {
	e := c.order.Remove(el).(*replayEntry)
	delete(c.entries, e.key)
	delete(c.byID, e.op.ID)
	c.used -= e.size
}

// forget drops the operations named (ids, or forgetAll) and moves the generation on.
func (c *replayCache) forget(ids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, id := range ids {
		if id == forgetAll {
			c.clear()
			return
		}
	}
	for _, id := range ids {
		if el, ok := c.byID[id]; ok {
			c.remove(el)
		}
	}
}

// isLive says whether the cache answers replays now.
func (c *replayCache) isLive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live && c.budget > 0
}

// setLive empties the cache and says whether it may be used from now on: true once a
// listener hears every invalidation, false when it stops hearing them.
func (c *replayCache) setLive(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.clear()
	c.live = live
}

func (c *replayCache) clear() {
	c.order.Init()
	clear(c.entries)
	clear(c.byID)
	c.used = 0
}

// missGuess guesses, from the recent replay-cache misses of this process, whether the next
// one is a new key or a known key the cache does not hold (evicted, or answered by another
// replica). Submit sends a new key's claim at once, the one statement that records it, and
// reads first for a known one: a claim sent for a known key writes nothing but costs a second
// round trip and a heavier statement than the read (replays spread over more operations than
// the cache holds ran at a third of their rate when every miss was sent as a claim first).
// The score moves one step per miss, between -missGuessBound and +missGuessBound: a run of
// known keys turns Submit to reading first within a few requests, a run of new keys back.
type missGuess struct{ score atomic.Int32 }

const missGuessBound = 16

// likelyNew says whether the next miss is more likely a new key.
func (g *missGuess) likelyNew() bool { return g.score.Load() >= 0 }

// saw records what a miss turned out to be.
func (g *missGuess) saw(known bool) {
	for {
		old := g.score.Load()
		next := old + 1
		if known {
			next = old - 1
		}
		if next > missGuessBound || next < -missGuessBound || g.score.CompareAndSwap(old, next) {
			return
		}
	}
}
