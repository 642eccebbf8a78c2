package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeSaysHowToGetTheCommand (issue 50 item 12): before the README first runs the
// `idemgate` command itself (not `go run ./cmd/idemgate`), it says how to get it, with a command
// that builds it from the repository; and that command names the real main package.
func TestReadmeSaysHowToGetTheCommand(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	firstUse := -1
	inShell := false
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			inShell = line == "```sh" && !inShell
			continue
		}
		if inShell && regexp.MustCompile(`^([A-Z_]+=\S* )*idemgate `).MatchString(line) {
			firstUse = i
			break
		}
	}
	require.GreaterOrEqual(t, firstUse, 0, "the README runs no idemgate command")
	before := strings.Join(lines[:firstUse], "\n")
	how := regexp.MustCompile("`go (install|build -o idemgate) (\\./cmd/idemgate)`")
	m := how.FindStringSubmatch(before)
	require.NotNil(t, m, "README.md runs `%s` at line %d without saying how to get the command", lines[firstUse], firstUse+1)
	_, err = os.Stat(filepath.Join(repoRoot, m[2], "main.go"))
	assert.NoError(t, err, "%s is the command's package", m[2])
}
