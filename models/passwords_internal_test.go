package models

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPasswordHashIsArgon2idPHC(t *testing.T) {
	t.Parallel()
	h, err := hashPassword("correct horse battery staple")
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`), h)
	assert.True(t, checkPassword(h, "correct horse battery staple"))
	assert.False(t, checkPassword(h, "correct horse battery stapl"))
	assert.False(t, checkPassword(h, ""))

	h2, err := hashPassword("correct horse battery staple")
	require.NoError(t, err)
	assert.NotEqual(t, h, h2, "a random salt per hash")
}

func TestCheckPasswordRefusesMalformedHashes(t *testing.T) {
	t.Parallel()
	good, err := hashPassword("correct horse battery staple")
	require.NoError(t, err)
	parts := strings.Split(good, "$")
	for name, h := range map[string]string{
		"empty":            "",
		"bcrypt":           "$2a$10$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234",
		"argon2i":          strings.Replace(good, "argon2id", "argon2i", 1),
		"other version":    strings.Replace(good, "v=19", "v=16", 1),
		"huge memory":      strings.Join([]string{"", parts[1], parts[2], "m=4194304,t=2,p=1", parts[4], parts[5]}, "$"),
		"zero time":        strings.Join([]string{"", parts[1], parts[2], "m=19456,t=0,p=1", parts[4], parts[5]}, "$"),
		"bad salt":         strings.Join([]string{"", parts[1], parts[2], parts[3], "!!!", parts[5]}, "$"),
		"short key":        strings.Join([]string{"", parts[1], parts[2], parts[3], parts[4], "AAAA"}, "$"),
		"missing a member": strings.Join(parts[:5], "$"),
	} {
		assert.False(t, checkPassword(h, "correct horse battery staple"), name)
	}
}

// Raised parameters in a stored hash still verify: the PHC string carries them.
func TestCheckPasswordReadsParametersFromTheHash(t *testing.T) {
	t.Parallel()
	p, ok := parseArgon2id(dummyHash())
	require.True(t, ok)
	assert.Equal(t, uint32(argonMemoryKiB), p.memory)
	assert.Equal(t, uint32(argonTime), p.time)
	assert.Equal(t, uint8(argonThreads), p.threads)
}
