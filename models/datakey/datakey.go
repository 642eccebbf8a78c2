// Package datakey seals the values of sensitive params at rest (AES-256-GCM), under a data
// key the operator gives in IDEMGATE_DATA_KEY, and opens what earlier keys sealed as long as
// they are listed in IDEMGATE_DATA_KEYS_OLD, so a key can be rotated without a pause.
//
// A sealed value is the text "v1:<key id>:<base64url(nonce || ciphertext)>". The key id is the
// first 8 hex digits of the SHA-256 of "idemgate data key id" and the key: operators name no
// keys, and the id says which one opens a value without revealing anything of it. The caller
// binds each value to where it is stored (additional authenticated data, here the operation
// id), so a sealed value copied onto another row does not open there.
package datakey

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Size is the size in bytes of a data key.
const Size = 32

// version starts every sealed value.
const version = "v1"

// Keyring is the current data key, which seals, and the older ones, which only open. It is
// safe for concurrent use.
type Keyring struct {
	current *key
	byID    map[string]*key
}

type key struct {
	id   string
	aead cipher.AEAD
}

// Parse returns the keyring of current (the base64 of Size random bytes) and old (such keys
// separated by commas or white space). Both empty is no keyring: nil, nil. Old keys without a
// current one are an error: nothing could be sealed.
func Parse(current, old string) (*Keyring, error) {
	current = strings.TrimSpace(current)
	olds := strings.FieldsFunc(old, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
	if current == "" {
		if len(olds) > 0 {
			return nil, errors.New("datakey: IDEMGATE_DATA_KEYS_OLD is set but IDEMGATE_DATA_KEY is not")
		}
		return nil, nil
	}
	cur, err := newKey(current)
	if err != nil {
		return nil, fmt.Errorf("datakey: IDEMGATE_DATA_KEY: %w", err)
	}
	kr := &Keyring{current: cur, byID: map[string]*key{cur.id: cur}}
	for i, s := range olds {
		k, err := newKey(s)
		if err != nil {
			return nil, fmt.Errorf("datakey: IDEMGATE_DATA_KEYS_OLD, key %d: %w", i+1, err)
		}
		kr.byID[k.id] = k
	}
	return kr, nil
}

// Generate returns a new random data key, encoded as Parse reads it.
func Generate() string {
	var b [Size]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms (Go 1.24+)
	return base64.StdEncoding.EncodeToString(b[:])
}

func newKey(encoded string) (*key, error) {
	raw, err := decode(encoded)
	if err != nil {
		return nil, err
	}
	if len(raw) != Size {
		return nil, fmt.Errorf("a data key is %d bytes encoded in base64, this one is %d bytes", Size, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("idemgate data key id\x00"), raw...))
	return &key{id: hex.EncodeToString(sum[:4]), aead: aead}, nil
}

// decode reads standard or URL-safe base64, padded or not.
func decode(s string) ([]byte, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("not base64")
	}
	return b, nil
}

// ID is the id of the current key.
func (kr *Keyring) ID() string { return kr.current.id }

// Seal encrypts plain under the current key, bound to aad.
func (kr *Keyring) Seal(plain, aad []byte) string {
	k := kr.current
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	_, _ = rand.Read(nonce)
	sealed := k.aead.Seal(nonce, nonce, plain, aad)
	return version + ":" + k.id + ":" + base64.RawURLEncoding.EncodeToString(sealed)
}

// Open decrypts a value Seal made under this keyring's current or an old key, bound to aad.
func (kr *Keyring) Open(sealed string, aad []byte) ([]byte, error) {
	id, k, body, err := kr.parse(sealed)
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, fmt.Errorf("datakey: sealed under data key %s, which is neither IDEMGATE_DATA_KEY nor in IDEMGATE_DATA_KEYS_OLD", id)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(raw) < k.aead.NonceSize() {
		return nil, errors.New("datakey: malformed sealed value")
	}
	plain, err := k.aead.Open(nil, raw[:k.aead.NonceSize()], raw[k.aead.NonceSize():], aad)
	if err != nil {
		return nil, fmt.Errorf("datakey: a value sealed under key %s does not open: %w", id, err)
	}
	return plain, nil
}

// Current reports whether sealed was sealed under the current key (rotation leaves it be).
func (kr *Keyring) Current(sealed string) bool {
	id, _, _, err := kr.parse(sealed)
	return err == nil && id == kr.current.id
}

// KeyID returns the id of the key a sealed value names, without opening it.
func KeyID(sealed string) (string, error) {
	v, rest, ok := strings.Cut(sealed, ":")
	id, _, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || v != version || id == "" {
		return "", errors.New("datakey: malformed sealed value")
	}
	return id, nil
}

func (kr *Keyring) parse(sealed string) (id string, k *key, body string, err error) {
	if id, err = KeyID(sealed); err != nil {
		return "", nil, "", err
	}
	body = sealed[len(version)+1+len(id)+1:]
	return id, kr.byID[id], body, nil
}
