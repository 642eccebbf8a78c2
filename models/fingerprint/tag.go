package fingerprint

import (
	"crypto/hmac"
	"crypto/sha256"
)

// Tag returns the HMAC-SHA256 under k of NUL, domain, then each part after a NUL: a tag that
// only the holder of the ledger's key can make, for a value idemgate hands out and must know
// again (a page cursor). A message that starts with NUL is neither a fingerprint's envelope
// (which starts with "{") nor a downstream key's (which starts with a tenant's name, never
// empty), so a tag can stand in for neither; domain keeps tags of different uses apart.
func (k *Key) Tag(domain string, parts ...string) [sha256.Size]byte {
	st := k.pool.Get().(*hasher)
	st.h.Reset()
	st.buf = append(append(st.buf[:0], 0), domain...)
	for _, p := range parts {
		st.buf = append(append(st.buf, 0), p...)
	}
	st.h.Write(st.buf)
	var out [sha256.Size]byte
	st.h.Sum(out[:0])
	release(&k.pool, st)
	return out
}

// TagEqual reports whether a tag (or its first bytes, at least 16) is the start of want, in
// constant time.
func TagEqual(got []byte, want [sha256.Size]byte) bool {
	return len(got) >= 16 && len(got) <= len(want) && hmac.Equal(got, want[:len(got)])
}
