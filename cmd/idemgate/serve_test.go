package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParsePublicURL: --public-url takes the console's absolute http(s) address, without the
// trailing slash; anything a link could not be made under is refused at start.
func TestParsePublicURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                                    "",
		"https://idemgate.example.com":        "https://idemgate.example.com",
		"https://idemgate.example.com/":       "https://idemgate.example.com",
		"http://10.0.0.5:8080/console/":       "http://10.0.0.5:8080/console",
		"https://review.example.com/idemgate": "https://review.example.com/idemgate",
	} {
		got, err := parsePublicURL(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"idemgate.example.com", "/operations", "ftp://example.com", "https://user:pw@example.com",
		"https://example.com/?a=1", "https://example.com/#x", "https://"} {
		_, err := parsePublicURL(bad)
		assert.Error(t, err, bad)
	}
}

// TestSMTPPasswordSources: the SMTP password comes from IDEMGATE_SMTP_PASSWORD or from a file
// (--smtp-password-file, a mounted secret), never both; a file that cannot be read stops the
// gateway at start rather than failing every email later.
func TestSMTPPasswordSources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "smtp-password")
	require.NoError(t, os.WriteFile(file, []byte("s3cret\n"), 0o600))
	parse := func(vars map[string]string, args ...string) (*serveFlags, error) {
		env := &environment{getenv: func(k string) string { return vars[k] }, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
		return env.parseServeFlags(append([]string{"--smtp-url", "smtp://idemgate@127.0.0.1:2525", "--smtp-from", "idemgate@example.com"}, args...), false)
	}

	f, err := parse(nil, "--smtp-password-file", file)
	require.NoError(t, err)
	assert.Equal(t, file, f.mail.PasswordFile)
	assert.Empty(t, f.mail.Password)

	f, err = parse(map[string]string{"IDEMGATE_SMTP_PASSWORD_FILE": file})
	require.NoError(t, err)
	assert.Equal(t, file, f.mail.PasswordFile, "the flag's environment variable")

	f, err = parse(map[string]string{"IDEMGATE_SMTP_PASSWORD": "s3cret"})
	require.NoError(t, err)
	assert.Equal(t, "s3cret", f.mail.Password)
	assert.Empty(t, f.mail.PasswordFile)

	_, err = parse(map[string]string{"IDEMGATE_SMTP_PASSWORD": "s3cret"}, "--smtp-password-file", file)
	assert.ErrorContains(t, err, "both set")

	_, err = parse(nil, "--smtp-password-file", filepath.Join(t.TempDir(), "missing"))
	assert.ErrorContains(t, err, "--smtp-password-file")
}
