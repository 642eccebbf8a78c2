package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxTrackedSize is the largest file the repository may hold: anything bigger is a build
// output, a dump or a data set committed by mistake (the largest screenshot is under 300 KB).
const maxTrackedSize = 2 << 20

// TestRepositoryTracksNoBuildOutput: no tracked file is a compiled executable (ELF, Mach-O, PE:
// `go build ./deploy/image` at the root once committed a 5.8 MB `image`), none is executable
// without being a script (a `#!` line), and none is over 2 MB. Build outputs belong in the
// ignored /idemgate, /image and dist/.
func TestRepositoryTracksNoBuildOutput(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil || !isGitWorkTree(git) {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but the repository's files cannot be listed with git: %v", err)
		}
		t.Skip("not a git work tree: nothing tracked to check")
	}
	out, err := exec.Command(git, "-C", repoRoot, "ls-files", "--stage", "-z").Output()
	require.NoError(t, err)
	checked := 0
	for _, entry := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		// "<mode> <object> <stage>\t<path>"
		meta, path, ok := strings.Cut(entry, "\t")
		require.True(t, ok, "git ls-files --stage answered %q", entry)
		mode := strings.Fields(meta)[0]
		if mode == "160000" || mode == "120000" { // a submodule or a symbolic link: no content here
			continue
		}
		reason, err := trackedFileProblem(filepath.Join(repoRoot, path), mode)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree, not yet committed
		}
		require.NoError(t, err)
		checked++
		if reason != "" {
			t.Errorf("%s is tracked but %s: remove it with `git rm --cached %s` and ignore it in .gitignore", path, reason, path)
		}
	}
	require.Greater(t, checked, 300, "too few tracked files checked")
}

// trackedFileProblem says why a tracked file with the given git mode should not be in the
// repository, or "" when it may.
func trackedFileProblem(path, mode string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	if info.Size() > maxTrackedSize {
		return "larger than 2 MB (" + humanSize(info.Size()) + ")", nil
	}
	head := make([]byte, 4)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	head = head[:n]
	for _, magic := range [][]byte{
		{0x7f, 'E', 'L', 'F'},    // Linux, BSD
		{0xcf, 0xfa, 0xed, 0xfe}, // Mach-O 64-bit
		{0xce, 0xfa, 0xed, 0xfe}, // Mach-O 32-bit
		{0xca, 0xfe, 0xba, 0xbe}, // Mach-O universal
		{'M', 'Z'},               // Windows PE
	} {
		if bytes.HasPrefix(head, magic) {
			return "a compiled executable", nil
		}
	}
	if mode == "100755" && !bytes.HasPrefix(head, []byte("#!")) {
		return "executable without being a script (no #! line)", nil
	}
	return "", nil
}

func humanSize(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }

func isGitWorkTree(git string) bool {
	out, err := exec.Command(git, "-C", repoRoot, "rev-parse", "--is-inside-work-tree").Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}
