package models

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// Passwords are hashed with argon2id (RFC 9106) rather than bcrypt: it is memory-hard, so
// guessing on GPUs costs far more; it reads the whole password (bcrypt silently ignores what
// follows the 72nd byte); and its PHC string records its parameters, so they can be raised
// later while old hashes still verify.
//
// The parameters are OWASP's recommended minimum for argon2id (19 MiB, 2 passes, 1 lane):
// about 20–40 ms per login on a server core, cheap for people and expensive for guessers.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonSaltLen   = 16
	argonKeyLen    = 32
)

// argonLimits bound the parameters a stored hash may ask for, so that a corrupted row cannot
// make a login allocate gigabytes.
const (
	argonMaxMemoryKiB = 1024 * 1024
	argonMaxTime      = 16
)

var b64 = base64.RawStdEncoding

// hashPassword returns the PHC string of password with a fresh random salt:
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>.
func hashPassword(password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemoryKiB, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// checkPassword reports whether password matches the PHC string hash, comparing in constant
// time. A malformed hash never matches.
func checkPassword(hash, password string) bool {
	p, ok := parseArgon2id(hash)
	if !ok || len(password) > maxPasswordLen {
		return false
	}
	got := argon2.IDKey([]byte(password), p.salt, p.time, p.memory, p.threads, uint32(len(p.key)))
	return subtle.ConstantTimeCompare(got, p.key) == 1
}

// argonParams is a parsed PHC string.
type argonParams struct {
	memory, time uint32
	threads      uint8
	salt, key    []byte
}

func parseArgon2id(hash string) (argonParams, bool) {
	var p argonParams
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, false
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return p, false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.memory, &p.time, &p.threads); err != nil {
		return p, false
	}
	if p.memory == 0 || p.memory > argonMaxMemoryKiB || p.time == 0 || p.time > argonMaxTime || p.threads == 0 {
		return p, false
	}
	var err error
	if p.salt, err = b64.DecodeString(parts[4]); err != nil || len(p.salt) < 8 {
		return p, false
	}
	if p.key, err = b64.DecodeString(parts[5]); err != nil || len(p.key) < 16 {
		return p, false
	}
	return p, true
}

// dummyHash is checked against when no user matches, so that an unknown email takes as long
// to refuse as a wrong password and does not reveal which addresses have accounts.
// It is computed once, on first use, and read-only afterwards.
var dummyHash = sync.OnceValue(func() string {
	h, err := hashPassword("not a password anyone has")
	if err != nil {
		panic(fmt.Sprintf("ledger: hash dummy password: %v", err))
	}
	return h
})
