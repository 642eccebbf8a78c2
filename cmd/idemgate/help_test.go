package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelpListsEveryFlagSet (issue 50 item 19): `idemgate help` prints every flag of every
// command, from the flag sets themselves (it left out flags CLI.md lists, such as serve's
// --smtp-url), and its list of flag sets is the one the source makes.
func TestHelpListsEveryFlagSet(t *testing.T) {
	t.Parallel()
	assert.Equal(t, flagSetNames(t), slices.Sorted(slices.Values(flagSets)), "flagSets in main.go names every newFlagSet")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"help"}, func(string) string { return "" }, strings.NewReader(""), &out, io.Discard))
	help := out.String()
	flagRE := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	total := 0
	for _, name := range flagSets {
		args := append(strings.Fields(name), "-h")
		if name == "audit key" {
			args = []string{"audit", "key", "list", "-h"}
		}
		var stderr bytes.Buffer
		_ = run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr)
		_, section, ok := strings.Cut(help, "\nidemgate "+name+"\n")
		require.True(t, ok, "help has no section for %s", name)
		section, _, _ = strings.Cut(section, "\nidemgate ")
		for _, f := range flagRE.FindAllStringSubmatch(stderr.String(), -1) {
			total++
			assert.Regexp(t, `(?m)^  -`+regexp.QuoteMeta(f[1])+`( |$)`, section, "help's %s section lacks -%s", name, f[1])
		}
	}
	assert.Greater(t, total, 40)
	assert.Regexp(t, `(?m)^  -smtp-url `, help, "a serve flag the summary's usage line does not name")
}

// TestHelpFlagExitsZero (issue 50 item 19): `idemgate CMD -h` prints the flags and exits 0
// (it exited 1 with "flag: help requested"); a failure still exits 1 and says why.
func TestHelpFlagExitsZero(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"export", "-h"}, func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr)
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.Contains(t, stderr.String(), "-format")
	var said bytes.Buffer
	assert.Equal(t, 0, exitCode(err, &said))
	assert.Empty(t, said.String(), "nothing more to say: the flags were printed")
	assert.Equal(t, 0, exitCode(nil, &said))
	assert.Equal(t, 1, exitCode(errors.New("no ledger"), &said))
	assert.Equal(t, "idemgate: no ledger\n", said.String())
}
