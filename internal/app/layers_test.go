package app_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/idemgate/idemgate/"

// layers lists idemgate's packages from the top of docs/ARCHITECTURE.md's picture to the
// bottom; a package belongs to the first prefix it matches. Leaves (imported by anyone,
// importing none of ours) are at the bottom.
var layers = [][]string{
	{"cmd/", "deploy/", "examples/", "e2e", "internal/openapispec/openapigen"},
	{"internal/consoletest", "internal/proctest"},
	{"internal/gatewaytest", "internal/openapispec", "internal/toolsimport"},
	{"internal/app"},
	{"web"},
	{"web/telemetry"},
	{"handlers"},
	{"handlers/export", "handlers/sso"},
	{"handlers/opview"},
	{"handlers/problems", "handlers/headers", "handlers/mcptasks", "views"},
	{"static"},
	{"jobs"},
	{"jobs/mcpclient"},
	{"jobs/downstream"},
	{"jobs/catalog"},
	{"jobs/catalog/rules"},
	{"models/testdb"},
	{"models"},
	{"models/fingerprint", "models/datakey"},
	{"internal/sandbox", "internal/gctune", "internal/groupcommit", "internal/oidctest", "internal/mcptest", "internal/buildinfo", "client"},
}

// layerOf is the index of pkg's layer; -1 when none matches.
func layerOf(pkg string) int {
	best, bestLen := -1, 0
	for i, prefixes := range layers {
		for _, p := range prefixes {
			if (pkg == p || strings.HasPrefix(pkg, p+"/") || strings.HasSuffix(p, "/") && strings.HasPrefix(pkg, p)) && len(p) > bestLen {
				best, bestLen = i, len(p)
			}
		}
	}
	return best
}

// TestImportsRunDown: no package imports one of a higher layer, so the folders say what the
// code is (issue 13, CONVENTIONS.md "Imports run one way").
func TestImportsRunDown(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		from := layerOf(pkg)
		if from < 0 {
			t.Errorf("package %s has no layer: add it to layers and to docs/ARCHITECTURE.md", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if to := layerOf(dep); to <= from && dep != pkg {
				t.Errorf("%s imports %s, which is not below it", pkg, dep)
			}
		}
	}
}
