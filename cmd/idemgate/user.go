package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/idemgate/idemgate/models"
)

const userUsage = "usage: idemgate user create --email E --role reviewer|auditor|admin [--tenants a,b] (password on standard input)"

// user runs `idemgate user create`.
func (env *environment) user(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "create" {
		return errors.New(userUsage)
	}
	fs := newFlagSet("user create", env.stderr)
	email := fs.String("email", "", "the user's email address (required)")
	role := fs.String("role", "", "reviewer, auditor or admin (required)")
	tenants := fs.String("tenants", "", "comma-separated tenants the user is limited to (default: every tenant)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *email == "" || *role == "" || fs.NArg() > 0 {
		return errors.New(userUsage)
	}
	password, err := readPassword(env.stdin)
	if err != nil {
		return err
	}
	l, closeDB, err := env.openLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	u, err := l.CreateUser(ctx, models.AllTenants(), cli, models.NewUser{Email: *email, Password: password, Role: models.Role(*role), Tenants: strings.Split(*tenants, ",")})
	if err != nil {
		return err
	}
	scope := "every tenant"
	if list := u.TenantList(); list != nil {
		scope = "tenants " + strings.Join(list, ", ")
	}
	fmt.Fprintf(env.stdout, "user %s created (role %s, %s)\n", u.Email, u.Role, scope)
	return nil
}

// readPassword reads the password from the first line of r, so that it never appears in the
// process list or the shell's history. It refuses one too short before touching the database.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password from standard input: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	if len([]rune(password)) < models.MinPasswordLen {
		return "", fmt.Errorf("the password (first line of standard input) must have at least %d characters", models.MinPasswordLen)
	}
	return password, nil
}
