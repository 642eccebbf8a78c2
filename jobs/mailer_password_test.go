package jobs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMailerPasswordFromFile: a password file is read for every SMTP session (its first line),
// so a rotated mounted secret applies without a restart; one that went missing fails the
// session, naming the file, never sending an empty password.
func TestMailerPasswordFromFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "smtp-password")
	require.NoError(t, os.WriteFile(file, []byte("first\nignored\n"), 0o600))
	cfg := &MailerConfig{PasswordFile: file, Password: "not this"}
	got, err := cfg.SMTPPassword()
	require.NoError(t, err)
	assert.Equal(t, "first", got)

	require.NoError(t, os.WriteFile(file, []byte("rotated\r\n"), 0o600))
	got, err = cfg.SMTPPassword()
	require.NoError(t, err)
	assert.Equal(t, "rotated", got, "read again, not kept from the first session")

	require.NoError(t, os.Remove(file))
	_, err = cfg.SMTPPassword()
	assert.ErrorContains(t, err, file)

	got, err = (&MailerConfig{Password: "from the environment"}).SMTPPassword()
	require.NoError(t, err)
	assert.Equal(t, "from the environment", got)
}
