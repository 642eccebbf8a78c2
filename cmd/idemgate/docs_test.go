package main

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// TestDocsNameNothingOutsideTheRepository: the repository stands alone. No file names a path
// of the directory around the clone (where a clone has nothing), and no file cites the sections
// of a document the repository does not hold: a reader has the docs/ pages instead.
func TestDocsNameNothingOutsideTheRepository(t *testing.T) {
	outside := ".." + "/shared" // written apart, so this file does not match itself
	cites := "SPEC " + "§"
	scanned := 0
	for _, path := range repoFiles(t, ".go", ".md", ".sh", ".sql", ".yaml", ".yml", ".json", ".templ", ".mjs", ".ts") {
		b, err := os.ReadFile(filepath.Join(repoRoot, path))
		require.NoError(t, err)
		scanned++
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, outside) {
				t.Errorf("%s:%d names a path outside the repository: %s", path, i+1, strings.TrimSpace(line))
			}
			if strings.Contains(line, cites) {
				t.Errorf("%s:%d cites a document the repository does not hold: %s", path, i+1, strings.TrimSpace(line))
			}
		}
	}
	require.Greater(t, scanned, 300, "the walk found too few files")
}

// TestReadmeIsAFrontDoor: a few screens, with the way to one's own API and to production early.
func TestReadmeIsAFrontDoor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	assert.Less(t, len(lines), 250, "README.md is the front door, not the manual: move detail into docs/")
	for _, h := range []string{"## Put it in front of your API", "## Run it in production", "## The two commands"} {
		i := slices.Index(lines, h)
		require.GreaterOrEqual(t, i, 0, "README.md has no %q", h)
		assert.Less(t, i, 120, "%q starts at line %d; a newcomer should reach it within 120 lines", h, i+1)
	}
	assert.Contains(t, string(b), "[Apache License 2.0](LICENSE)")
}

// TestCLIReference: every flag of every flag set the command line builds is in docs/CLI.md,
// under its command's heading, and so is every IDEMGATE_ variable the repository's code reads.
// The flag sets are found in the source (each newFlagSet call names its command) and their
// flags by asking each command for -h, as a user would.
func TestCLIReference(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/CLI.md"))
	require.NoError(t, err)
	doc := string(b)

	commands := flagSetNames(t)
	require.GreaterOrEqual(t, len(commands), 10, "flag sets found: %v", commands)
	flagRE := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	total := 0
	for _, name := range commands {
		var stderr strings.Builder
		err := run(context.Background(), append(strings.Fields(name), "-h"), func(string) string { return "" },
			strings.NewReader(""), io.Discard, &stderr)
		require.Error(t, err, "%s -h", name)
		flags := flagRE.FindAllStringSubmatch(stderr.String(), -1)
		require.NotEmpty(t, flags, "%s -h lists no flags:\n%s", name, stderr.String())
		heading := "### `idemgate " + name + "`"
		sec := docSection(doc, heading)
		if sec == "" {
			t.Errorf("docs/CLI.md has no %q", heading)
			continue
		}
		for _, f := range flags {
			total++
			if !strings.Contains(sec, "`--"+f[1]+"`") {
				t.Errorf("docs/CLI.md %q does not document `--%s`", heading, f[1])
			}
		}
	}
	require.Greater(t, total, 40, "flags found")

	envRE := regexp.MustCompile(`IDEMGATE_[A-Z0-9_]*[A-Z0-9]`)
	vars := map[string]bool{}
	for _, path := range repoFiles(t, ".go", ".sh") {
		src, err := os.ReadFile(filepath.Join(repoRoot, path))
		require.NoError(t, err)
		for _, v := range envRE.FindAllString(string(src), -1) {
			vars[v] = true
		}
	}
	require.Greater(t, len(vars), 20, "variables found: %v", vars)
	for v := range vars {
		if !strings.Contains(doc, "`"+v+"`") {
			t.Errorf("docs/CLI.md does not document `%s`", v)
		}
	}
}

// flagSetNames are the commands of every newFlagSet call in this package's source, and it
// fails if a flag set is made any other way (it would escape this test).
func flagSetNames(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	var names []string
	newFlagSets := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				if fn.Name == "newFlagSet" && len(call.Args) > 0 {
					lit, ok := call.Args[0].(*ast.BasicLit)
					require.True(t, ok, "newFlagSet's name is a literal: %s", fset.Position(call.Pos()))
					name, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					if !slices.Contains(names, name) {
						names = append(names, name)
					}
				}
			case *ast.SelectorExpr:
				if x, ok := fn.X.(*ast.Ident); ok && x.Name == "flag" && fn.Sel.Name == "NewFlagSet" {
					newFlagSets++
				}
			}
			return true
		})
	}
	require.Equal(t, 1, newFlagSets, "flag sets are made by newFlagSet only, so this test sees them all")
	slices.Sort(names)
	return names
}

// TestAPIReferenceNamesEveryProblemType: docs/API.md names every problem type the API answers.
func TestAPIReferenceNamesEveryProblemType(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/API.md"))
	require.NoError(t, err)
	sec := docSection(string(b), "## Problem types")
	require.NotEmpty(t, sec, "docs/API.md has no \"## Problem types\"")
	all := problems.All()
	require.Greater(t, len(all), 20)
	for _, p := range all {
		if !strings.Contains(sec, "`"+p.Slug+"`") {
			t.Errorf("docs/API.md does not name the problem type `%s`", p.Slug)
		}
	}
}

// TestMarkdownLinksResolve: every relative link and image in README.md and the Markdown under
// docs/ and examples/ names a file of the repository, and every #anchor a heading of its page
// (GitHub's slugs).
func TestMarkdownLinksResolve(t *testing.T) {
	linkRE := regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	var pages []string
	for _, p := range repoFiles(t, ".md") {
		if p == "README.md" || strings.HasPrefix(p, "docs/") || strings.HasPrefix(p, "examples/") {
			pages = append(pages, p)
		}
	}
	require.Greater(t, len(pages), 10, "pages: %v", pages)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		anchors[page] = headingSlugs(string(b))
		return anchors[page]
	}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		for i, line := range proseLines(string(b)) {
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), file)))
					if _, err := os.Stat(filepath.Join(repoRoot, dest)); err != nil {
						t.Errorf("%s:%d links %s: no such file in the repository", page, i+1, target)
						continue
					}
				}
				if anchor != "" {
					if !strings.HasSuffix(dest, ".md") {
						t.Errorf("%s:%d links %s: an anchor into a file that is not Markdown", page, i+1, target)
					} else if !anchorsOf(dest)[anchor] {
						t.Errorf("%s:%d links %s: %s has no heading with that anchor", page, i+1, target, dest)
					}
				}
			}
		}
	}
	require.Greater(t, checked, 50, "links checked")
}

// TestHeadingSlugs pins GitHub's anchor rules the link check relies on.
func TestHeadingSlugs(t *testing.T) {
	got := headingSlugs("# A\n## Through PgBouncer: `bash cmd/idembench/pgbouncer.sh`\n## States and retries\n" +
		"## States and retries\n### `idemgate apikey create`\n```\n## not a heading\n```\n## For agents: OpenAPI, a Go client\n")
	for _, want := range []string{"a", "through-pgbouncer-bash-cmdidembenchpgbouncersh", "states-and-retries",
		"states-and-retries-1", "idemgate-apikey-create", "for-agents-openapi-a-go-client"} {
		assert.True(t, got[want], "%s in %v", want, got)
	}
	assert.False(t, got["not-a-heading"])
}

// headingSlugs are the anchors GitHub gives a page's headings: lower case, punctuation
// dropped, spaces as hyphens, a repeated slug numbered.
func headingSlugs(md string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	for _, line := range proseLines(md) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if n := count[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		count[slug]++
	}
	return out
}

// proseLines are the page's lines with those inside fenced code blocks blanked, so that a
// shell comment is not a heading and code is not a link.
func proseLines(md string) []string {
	lines := strings.Split(md, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
		}
	}
	return lines
}

// docSection is the text under heading up to the next heading of the same level or above, ""
// when the page has no such heading.
func docSection(md, heading string) string {
	i := strings.Index(md, "\n"+heading+"\n")
	if i < 0 {
		return ""
	}
	rest := md[i+len(heading)+2:]
	level := heading[:strings.Index(heading, " ")]
	for j := 0; j < len(rest); {
		k := strings.Index(rest[j:], "\n#")
		if k < 0 {
			break
		}
		line := rest[j+k+1:]
		hashes := len(line) - len(strings.TrimLeft(line, "#"))
		if hashes <= len(level) && strings.HasPrefix(line[hashes:], " ") {
			return rest[:j+k]
		}
		j += k + 1
	}
	return rest
}

// repoFiles lists the repository's files with one of the extensions, relative to its root,
// skipping what is not the repository's own (dependencies npm installs, build output).
func repoFiles(t *testing.T, exts ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "build", "generated", "testdata": // generated: made from what is checked here
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains(exts, filepath.Ext(path)) {
			rel, err := filepath.Rel(repoRoot, path)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	return out
}
