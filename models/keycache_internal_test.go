package models

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestKeyCacheFencesRacingLookUps: a look-up that began before a revocation cannot store
// what it read, which may be the key as it was before the revocation.
func TestKeyCacheFencesRacingLookUps(t *testing.T) {
	c := newKeyCache(time.Hour)
	caller := &Caller{Tenant: "acme", Key: APIKey{ID: "key-1"}}

	_, gen := c.get("h1") // a look-up starts, misses, goes to the database
	c.forget("key-1")     // meanwhile the key is revoked
	c.put("h1", gen, caller)
	got, _ := c.get("h1")
	assert.Nil(t, got, "the stale read was not stored")

	_, gen = c.get("h1")
	c.put("h1", gen, caller)
	got, _ = c.get("h1")
	assert.Equal(t, caller, got, "an undisturbed look-up is stored")

	_, gen = c.get("h2")
	c.flush() // the listener reconnected: anything may have been missed
	c.put("h2", gen, &Caller{Key: APIKey{ID: "key-2"}})
	got, _ = c.get("h2")
	assert.Nil(t, got)
	got, _ = c.get("h1")
	assert.Nil(t, got, "flush forgets everything")
}

// TestKeyCacheExpiresAndStaysBounded: entries end at their TTL, and the cache never holds
// more than keyCacheMax keys.
func TestKeyCacheExpiresAndStaysBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	c := newKeyCache(time.Second)
	c.now = func() time.Time { return now }
	_, gen := c.get("h")
	c.put("h", gen, &Caller{Key: APIKey{ID: "k"}})
	now = now.Add(999 * time.Millisecond)
	got, _ := c.get("h")
	assert.NotNil(t, got)
	now = now.Add(time.Millisecond)
	got, _ = c.get("h")
	assert.Nil(t, got, "gone at its TTL")

	for i := range keyCacheMax + 50 {
		_, gen := c.get("")
		c.put(string(rune(i))+"-hash", gen, &Caller{})
	}
	assert.Len(t, c.entries, keyCacheMax)

	off := newKeyCache(0)
	_, gen = off.get("h")
	off.put("h", gen, &Caller{})
	got, _ = off.get("h")
	assert.Nil(t, got, "a TTL of 0 turns the cache off")
}
