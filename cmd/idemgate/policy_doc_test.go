package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPolicyDocExamples runs every example of docs/POLICY.md through `idemgate policy test`: each
// "policy NAME" block, added to the page's tools, with its "cases NAME" block. A page whose
// example no longer decides as it says fails here. A case changed to expect otherwise must fail
// too, so the command is shown able to fail.
func TestPolicyDocExamples(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "POLICY.md"))
	require.NoError(t, err)
	blocks := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)<!-- policy-doc: ([a-z ]+) -->\\n```yaml\\n(.*?)\\n```").FindAllStringSubmatch(string(page), -1) {
		blocks[m[1]] = m[2] + "\n"
	}
	require.Contains(t, blocks, "tools")
	examples := 0
	for name, policy := range blocks {
		example, ok := strings.CutPrefix(name, "policy ")
		if !ok {
			continue
		}
		examples++
		t.Run(example, func(t *testing.T) {
			cases, ok := blocks["cases "+example]
			require.True(t, ok, "example %s has no cases", example)
			dir := t.TempDir()
			tools := filepath.Join(dir, "tools.yaml")
			require.NoError(t, os.WriteFile(tools, []byte(blocks["tools"]+policy), 0o600))
			file := filepath.Join(dir, "cases.yaml")
			require.NoError(t, os.WriteFile(file, []byte(cases), 0o600))
			r := runStdin(t, "", nil, "", "policy", "test", "--tools", tools, file)
			require.NoError(t, r.err, r.stdout)
			assert.Regexp(t, `(?m)^\d+ passed, 0 failed$`, r.stdout)

			wrong := strings.Replace(cases, "expect: allow", "expect: deny", 1)
			if wrong == cases {
				wrong = strings.Replace(cases, "expect: deny", "expect: allow", 1)
			}
			require.NoError(t, os.WriteFile(file, []byte(wrong), 0o600))
			r = runStdin(t, "", nil, "", "policy", "test", "--tools", tools, file)
			require.Error(t, r.err, "a case that expects otherwise fails")
			assert.Contains(t, r.stdout, "FAIL ")
		})
	}
	assert.Equal(t, 3, examples, "refunds, payouts and emails")

	// explain names every rule and budget of a call and the decision.
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.yaml")
	require.NoError(t, os.WriteFile(tools, []byte(blocks["tools"]+blocks["policy refunds"]), 0o600))
	r := runStdin(t, "", nil, "", "policy", "explain", "--tools", tools, "--tool", "refunds.issue",
		"--params", `{"order_id":"o-1","amount_cents":60000,"currency":"EUR"}`, "--principal", "support-agent")
	require.NoError(t, r.err)
	for _, want := range []string{"no-refunds-over-10k", "finance-bot", "big-refunds-need-a-person", "refunds-per-agent-per-day",
		"charges 60000 to support-agent/EUR", "decision: require_approval (decided by big-refunds-need-a-person"} {
		assert.Contains(t, r.stdout, want)
	}
}

// TestReadmeToolsFileLoads: the README's tools file, policy and budget included, is one `serve`
// takes (its connection's token given as the environment would).
func TestReadmeToolsFileLoads(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```yaml\\n# tools.yaml\\n(.*?)\\n```").FindSubmatch(readme)
	require.NotNil(t, m, "the README's tools file")
	cat, err := catalog.LoadWith(m[1], catalog.Options{Getenv: func(string) string { return "token" }})
	require.NoError(t, err)
	require.True(t, cat.Rules().Applies("invoices.create"))
	assert.Len(t, cat.Rules().Budgets(), 1)
	// The demo's own file has its rule and budget too (serve --demo).
	demo := catalog.Demo("http://127.0.0.1/sandbox")
	require.True(t, demo.Rules().Applies("refunds.issue"))
	assert.Equal(t, "refunds-per-agent-per-day", demo.Rules().Budgets()[0].Name)
}
