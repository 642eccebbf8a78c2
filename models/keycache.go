package models

import (
	"sync"
	"time"
)

// DefaultKeyCacheTTL bounds how long an authenticated API key is believed without asking the
// database again. Revocations through this process forget the key at once, and on PostgreSQL
// every replica forgets it when the revocation's notification arrives (milliseconds); the TTL
// is the backstop for what no notification reaches: a revocation by another process on
// SQLite, or one made while this replica's listener was reconnecting.
const DefaultKeyCacheTTL = time.Second

// keyCacheMax bounds the memory the cache can take. Only keys that authenticated are stored,
// so a caller spraying random secrets cannot fill it; past the bound an arbitrary entry goes.
const keyCacheMax = 10_000

// keyCache remembers recent successful authentications by key hash, so a busy agent's
// requests do not each pay a database read before the one that answers them.
//
// Entries are written only by a look-up that began after the last invalidation (the
// generation check), so a read racing a revocation cannot put the revoked key back.
//
// Hand-written rather than hashicorp/golang-lru's expirable LRU: that one starts a goroutine
// per cache that never exits, and has no way to express the generation check.
type keyCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	gen     uint64
	entries map[string]keyEntry // by key hash
}

type keyEntry struct {
	caller  Caller
	expires time.Time
}

func newKeyCache(ttl time.Duration) *keyCache {
	return &keyCache{ttl: ttl, now: time.Now, entries: map[string]keyEntry{}}
}

// get returns the cached caller for hash, and the generation a look-up that misses must hand
// back to put.
func (c *keyCache) get(hash string) (*Caller, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok || c.ttl <= 0 {
		return nil, c.gen
	}
	if !c.now().Before(e.expires) {
		delete(c.entries, hash)
		return nil, c.gen
	}
	caller := e.caller // a copy: callers may not change the cached one
	return &caller, c.gen
}

// put stores caller under hash unless the cache was invalidated since gen was read.
func (c *keyCache) put(hash string, gen uint64, caller *Caller) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if _, ok := c.entries[hash]; !ok && len(c.entries) >= keyCacheMax {
		for h := range c.entries {
			delete(c.entries, h)
			break
		}
	}
	c.entries[hash] = keyEntry{caller: *caller, expires: c.now().Add(c.ttl)}
}

// forget drops the key with this id, and fences out look-ups already in flight.
func (c *keyCache) forget(keyID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for h, e := range c.entries {
		if e.caller.Key.ID == keyID {
			delete(c.entries, h)
		}
	}
}

// flush drops every entry: after notifications may have been missed.
func (c *keyCache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.entries)
}
