package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runUserCommand runs `idemgate args…` against dsn with stdin, returning stdout, stderr and
// the error run returned.
func runUserCommand(t *testing.T, dsn, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "IDEMGATE_DATABASE_URL" {
			return dsn
		}
		return ""
	}
	err := run(context.Background(), args, getenv, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestUserCreate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		dsn := migratedDSN(t, d)
		_, _, err := runUserCommand(t, dsn, "", "tenant", "create", "acme")
		require.NoError(t, err)

		out, _, err := runUserCommand(t, dsn, "correct horse battery\nignored second line\n",
			"user", "create", "--email", "Rita@Example.com", "--role", "reviewer", "--tenants", "acme")
		require.NoError(t, err)
		assert.Equal(t, "user rita@example.com created (role reviewer, tenants acme)\n", out)

		out, _, err = runUserCommand(t, dsn, "another long password", "user", "create", "--email", "ada@example.com", "--role", "admin")
		require.NoError(t, err, "a last line without newline is read too")
		assert.Equal(t, "user ada@example.com created (role admin, every tenant)\n", out)

		for name, tc := range map[string]struct {
			stdin string
			args  []string
			want  string
		}{
			"short password":  {"too short\n", []string{"--email", "x@example.com", "--role", "auditor"}, "at least 12 characters"},
			"no password":     {"", []string{"--email", "x@example.com", "--role", "auditor"}, "at least 12 characters"},
			"taken email":     {"correct horse battery\n", []string{"--email", "RITA@example.com", "--role", "auditor"}, "already exists"},
			"unknown role":    {"correct horse battery\n", []string{"--email", "x@example.com", "--role", "root"}, `role "root"`},
			"unknown tenant":  {"correct horse battery\n", []string{"--email", "x@example.com", "--role", "auditor", "--tenants", "initech"}, `tenant "initech" does not exist`},
			"missing email":   {"correct horse battery\n", []string{"--role", "auditor"}, "usage: idemgate user create"},
			"unknown flag":    {"correct horse battery\n", []string{"--email", "x@example.com", "--role", "auditor", "--admin"}, "flag provided but not defined"},
			"stray arguments": {"correct horse battery\n", []string{"--email", "x@example.com", "--role", "auditor", "extra"}, "usage: idemgate user create"},
		} {
			_, stderr, err := runUserCommand(t, dsn, tc.stdin, append([]string{"user", "create"}, tc.args...)...)
			require.Error(t, err, name)
			assert.Contains(t, err.Error()+stderr, tc.want, name)
		}
		_, _, err = runUserCommand(t, dsn, "", "user", "delete")
		assert.Error(t, err)
	})
}
