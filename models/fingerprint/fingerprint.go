// Package fingerprint computes the gateway's operation identity.
//
// A fingerprint is "hmac-sha256:" followed by the lower-case hex HMAC-SHA256,
// under the ledger's key, of the RFC 8785 (JCS) canonical JSON of
// {"tool": <name>, "params": <params>} (docs/STATES.md). Key order, insignificant
// whitespace, string escapes and number spelling (1.0, 1, 1e0) do not change
// it. It is keyed because it is shown wherever the operation is: a plain hash
// would let anyone who sees it test guesses of a masked param offline.
// Ledgers written before fingerprints were keyed hold the plain SHA-256 form
// ("sha256:…", see Legacy) on their older operations.
//
// JCS on its own is not injective over arbitrary JSON text: it represents
// numbers as IEEE-754 doubles, so 12345678901234567891 and
// 12345678901234567890 canonicalise alike, and common decoders silently
// replace invalid UTF-8 and keep the last of duplicate member names. Normalize
// therefore accepts only I-JSON (RFC 7493) whose every number survives the
// trip through a double unchanged, and rejects everything else. Two inputs that
// Normalize maps to the same bytes are the same JSON value, with numbers
// compared as exact decimals.
//
// Normalize produces exactly the output of github.com/gowebpki/jcs for every
// input it accepts; the tests and fuzz targets check that. It is a separate
// single-pass implementation because it has to parse the input anyway to
// enforce the rules above, and because it is on the path of every request.
package fingerprint

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"sync"
	"unicode/utf8"
)

// Prefix starts every fingerprint Key.Of returns.
const Prefix = "hmac-sha256:"

// Len is the length in bytes of every fingerprint Key.Of returns.
const Len = len(Prefix) + 2*sha256.Size

// LegacyPrefix starts the plain fingerprints of operations recorded before fingerprints were
// keyed (see Legacy).
const LegacyPrefix = "sha256:"

// KeySize is the size in bytes of a ledger's key.
const KeySize = 32

// DownstreamKeyPrefix starts every downstream key.
const DownstreamKeyPrefix = "dk_"

// Key is a ledger's secret key: it keys the fingerprints and derives the downstream keys
// (docs/STATES.md). It is safe for concurrent use.
type Key struct {
	pool sync.Pool // of *hasher holding an HMAC keyed with the ledger's key
}

// NewKey returns the key made of raw, which must be KeySize random bytes.
func NewKey(raw []byte) (*Key, error) {
	if len(raw) != KeySize {
		return nil, errors.New("fingerprint: a ledger key is 32 bytes")
	}
	secret := append([]byte(nil), raw...)
	k := &Key{}
	k.pool.New = func() any { return &hasher{h: hmac.New(sha256.New, secret), buf: make([]byte, 0, 128)} }
	return k, nil
}

// hasher is the reusable state of one fingerprint. Everything handed to the hash lives in it,
// so nothing escapes per call.
type hasher struct {
	h   hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

var plainPool = sync.Pool{New: func() any { return &hasher{h: sha256.New(), buf: make([]byte, 0, 128)} }}

// Of returns the fingerprint of a call of tool with the given parameters under k.
//
// canonicalParams must be the output of Normalize; Of does not check it. Of writes the
// canonical envelope {"params":<canonicalParams>,"tool":<tool>} (members already in JCS
// order) straight into the MAC, so the parameters are not canonicalised a second time. tool
// should be valid UTF-8; an invalid byte in it is encoded as U+FFFD, as encoding/json does.
func (k *Key) Of(tool string, canonicalParams []byte) string {
	st := k.pool.Get().(*hasher)
	var fp [Len]byte
	copy(fp[:], Prefix)
	st.envelope(tool, canonicalParams, fp[len(Prefix):])
	release(&k.pool, st)
	return string(fp[:])
}

// Fingerprint normalises rawParams and returns the fingerprint of a call of tool with them
// under k. The error, if any, is the one Normalize returns.
func (k *Key) Fingerprint(tool string, rawParams []byte) (string, error) {
	canon, err := Normalize(rawParams)
	if err != nil {
		return "", err
	}
	return k.Of(tool, canon), nil
}

// DownstreamKey returns the key sent to the downstream for the operation key of tenant
// (docs/STATES.md): "dk_" and the first 32 hex digits of the HMAC-SHA256 of tenant, NUL, key. It
// depends on nothing else, so an operation the ledger lost and the agent's retry created anew
// sends the key the downstream already saw.
func (k *Key) DownstreamKey(tenant, key string) string {
	st := k.pool.Get().(*hasher)
	st.h.Reset()
	st.buf = append(append(append(st.buf[:0], tenant...), 0), key...)
	st.h.Write(st.buf)
	st.h.Sum(st.sum[:0])
	var dk [len(DownstreamKeyPrefix) + 32]byte
	copy(dk[:], DownstreamKeyPrefix)
	hex.Encode(dk[len(DownstreamKeyPrefix):], st.sum[:16])
	release(&k.pool, st)
	return string(dk[:])
}

// Legacy returns the plain fingerprint the ledger recorded before fingerprints were keyed:
// "sha256:" and the hex SHA-256 of the same canonical envelope. It is only compared with
// what operations recorded back then hold; nothing new is given one.
func Legacy(tool string, canonicalParams []byte) string {
	st := plainPool.Get().(*hasher)
	var fp [len(LegacyPrefix) + 2*sha256.Size]byte
	copy(fp[:], LegacyPrefix)
	st.envelope(tool, canonicalParams, fp[len(LegacyPrefix):])
	release(&plainPool, st)
	return string(fp[:])
}

// envelope hashes {"params":<canonicalParams>,"tool":<tool>} and writes the hex digest to dst.
func (st *hasher) envelope(tool string, canonicalParams []byte, dst []byte) {
	st.h.Reset()
	st.buf = append(st.buf[:0], `{"params":`...)
	st.h.Write(st.buf)
	st.h.Write(canonicalParams)
	st.buf = append(st.buf[:0], `,"tool":`...)
	st.buf = appendString(st.buf, tool)
	st.buf = append(st.buf, '}')
	st.h.Write(st.buf)
	st.h.Sum(st.sum[:0])
	hex.Encode(dst, st.sum[:])
}

func release(p *sync.Pool, st *hasher) {
	if cap(st.buf) <= 4096 {
		p.Put(st)
	}
}

// appendString appends s to dst as a JCS string literal, quotes included.
// Invalid UTF-8 in s is encoded as U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		if c < utf8.RuneSelf {
			dst = appendRune(dst, rune(c))
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
		}
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendRune appends the JCS (ECMAScript JSON.stringify) form of r, which
// must be a Unicode scalar value, to dst: the two-character escapes for
// quote, backslash, \b, \f, \n, \r and \t, \u00xx with lower-case hex for the
// other control characters, and the UTF-8 encoding for everything else.
func appendRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		const hexDigits = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}
