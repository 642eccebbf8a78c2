package mcpclient

import (
	"sync"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
)

// recentFor is how long a call's sensitive values are still masked in its server's standard
// error after the call ends: a server may log what it did after it answered.
const recentFor = 30 * time.Second

// maxRecent bounds how many ended calls are remembered, whatever the rate of calls.
const maxRecent = 256

// callSecrets are the sensitive values of a server's calls in flight and of those that ended
// within recentFor, for scrubbing what the server writes that is not an answer.
type callSecrets struct {
	mu     sync.Mutex
	next   uint64
	active map[uint64]*catalog.Secrets
	recent []endedCall
}

type endedCall struct {
	secrets *catalog.Secrets
	ended   time.Time
}

// begin registers a call's secrets and returns the function that ends it.
func (c *callSecrets) begin(s *catalog.Secrets) (end func()) {
	if s == nil {
		return func() {}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active == nil {
		c.active = map[uint64]*catalog.Secrets{}
	}
	id := c.next
	c.next++
	c.active[id] = s
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.active, id)
		if len(c.recent) == maxRecent {
			c.recent = append(c.recent[:0], c.recent[1:]...)
		}
		c.recent = append(c.recent, endedCall{secrets: s, ended: time.Now()})
	}
}

// secrets returns every value to mask now (nil for none).
func (c *callSecrets) secrets() *catalog.Secrets {
	c.mu.Lock()
	defer c.mu.Unlock()
	cutoff := time.Now().Add(-recentFor)
	kept := c.recent[:0]
	for _, e := range c.recent {
		if e.ended.After(cutoff) {
			kept = append(kept, e)
		}
	}
	clear(c.recent[len(kept):])
	c.recent = kept
	var out *catalog.Secrets
	for _, s := range c.active {
		out = out.Merge(s)
	}
	for _, e := range c.recent {
		out = out.Merge(e.secrets)
	}
	return out
}
