package catalog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Secret is a literal value (fixed headers only) or a reference: {env: NAME} (read at
// start), {file: PATH} (read when used) or {tenant: NAME} (the operation's tenant's secret).
type Secret struct {
	Literal string
	Env     string
	File    string
	Tenant  string
	env     string // the value of Env, read once at load
}

// IsZero reports whether s names nothing.
func (s Secret) IsZero() bool { return s == Secret{} }

// String names the reference, never its value: {env: NAME}, {file: PATH}, {tenant: NAME}.
func (s Secret) String() string {
	switch {
	case s.Env != "":
		return "{env: " + s.Env + "}"
	case s.File != "":
		return "{file: " + s.File + "}"
	case s.Tenant != "":
		return "{tenant: " + s.Tenant + "}"
	}
	return "a literal value"
}

// ErrSecretMissing is the cause of a secret that cannot be read when it is used.
var ErrSecretMissing = errors.New("secret not available")

// Resolve returns the secret's value. tenant looks up a {tenant: …} secret of the operation's
// tenant. A file is read on every call, so a rotated mounted secret applies at once; its
// value is its first line.
func (s Secret) Resolve(tenant func(name string) (string, error)) (string, error) {
	switch {
	case s.Env != "":
		return s.env, nil
	case s.File != "":
		data, err := os.ReadFile(s.File)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrSecretMissing, s, errors.Unwrap(err))
		}
		return firstLine(string(data)), nil
	case s.Tenant != "":
		if tenant == nil {
			return "", fmt.Errorf("%w: %s: no tenant secrets here", ErrSecretMissing, s)
		}
		v, err := tenant(s.Tenant)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrSecretMissing, s, err)
		}
		return v, nil
	}
	return s.Literal, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSuffix(s, "\r")
}

// parseSecret reads a secret as written: a string (when literals are allowed) or a mapping
// with exactly one of env, file, tenant. An env secret is read now, and must be set; a file
// secret must be readable now (it is read again when used).
func parseSecret(v any, literalOK bool, chk connectionChecks) (Secret, error) {
	switch x := v.(type) {
	case nil:
		return Secret{}, errors.New("required: a secret reference {env: NAME}, {file: PATH} or {tenant: NAME}")
	case string:
		if !literalOK {
			return Secret{}, errors.New("a credential must be a secret reference ({env: NAME}, {file: PATH} or {tenant: NAME}), not a value written in the tools file")
		}
		return Secret{Literal: x}, nil
	case map[string]any:
		if len(x) != 1 {
			return Secret{}, errors.New("a secret reference has exactly one of env, file or tenant")
		}
		for k, val := range x {
			name, ok := val.(string)
			if !ok || name == "" {
				return Secret{}, fmt.Errorf("%s: expected a non-empty string", k)
			}
			switch k {
			case "env":
				if chk.unsent {
					return Secret{Env: name}, nil // named, not read: nothing is sent
				}
				value := chk.getenv(name)
				if value == "" {
					return Secret{}, fmt.Errorf("{env: %s}: the environment variable is not set", name)
				}
				return Secret{Env: name, env: value}, nil
			case "file":
				s := Secret{File: chk.path(name)}
				if chk.unsent {
					return s, nil
				}
				if _, err := os.ReadFile(s.File); err != nil {
					return Secret{}, fmt.Errorf("{file: %s}: %v", name, errors.Unwrap(err))
				}
				return s, nil
			case "tenant":
				if !connectionNameRE.MatchString(name) {
					return Secret{}, fmt.Errorf("{tenant: %s}: invalid secret name: want %s", name, connectionNameRE)
				}
				return Secret{Tenant: name}, nil
			}
			return Secret{}, fmt.Errorf("unknown secret source %q: want env, file or tenant", k)
		}
	}
	return Secret{}, errors.New("expected a secret reference {env: NAME}, {file: PATH} or {tenant: NAME}")
}

func (c connectionChecks) path(p string) string {
	if p == "" || filepath.IsAbs(p) || c.dir == "" {
		return p
	}
	return filepath.Join(c.dir, p)
}
