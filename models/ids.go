package models

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/oklog/ulid/v2"
)

// newID returns prefix + "_" + a ULID: unique, and sortable by creation time, so lists can page
// by id.
func newID(prefix string) string {
	return prefix + "_" + ulid.Make().String()
}

// NewOperationID returns a fresh operation id, e.g. op_01JD7X4T6V8Q0W9M3K5N2P1R8S.
func NewOperationID() string { return newID("op") }

// NewAttemptID returns a fresh attempt id; it is also the X-Request-Id sent downstream.
func NewAttemptID() string { return newID("att") }

// APIKeyPrefixLen is how much of a key is stored in clear, to name it in lists and revoke it.
const APIKeyPrefixLen = 12

// newAPIKey returns a key in the form of docs/API.md: "idg_" + 43 url-safe base64 characters
// (32 random bytes).
func newAPIKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "idg_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// HashAPIKey is the only form in which a key is stored.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// WellFormedAPIKey reports whether s has the shape of a key, so that garbage is refused without
// a database round trip.
func WellFormedAPIKey(s string) bool {
	if len(s) != 4+43 || !strings.HasPrefix(s, "idg_") {
		return false
	}
	for _, c := range s[4:] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
