package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exportToolsYAML is the catalogue the export commands mask with: card_number is sensitive.
const exportToolsYAML = `
tools:
  - name: payments.charge
    description: Charge a card
    effect: write
    params_schema:
      type: object
      properties:
        card_number: {type: string}
        memo: {type: string}
    sensitive_params: [card_number]
    http:
      url: http://127.0.0.1:9/charge
`

const cliCard = "4111111111111111"

// seededEntries is how many audit entries newCLILedger's set-up writes: each of its two tenants
// and two API keys is an admin change with its entry. An export's entry comes after them.
const seededEntries = 4

// cliLedger is a database with operations of two tenants, and the environment of commands run
// against it.
type cliLedger struct {
	dsn   string
	tools string
	l     *models.Ledger
	// dataKey is the commands' IDEMGATE_DATA_KEY: it seals the audit signing key.
	dataKey string
}

func newCLILedger(t *testing.T, d models.Dialect) *cliLedger {
	t.Helper()
	ctx := context.Background()
	c := &cliLedger{dsn: testdb.DSN(t, d), tools: filepath.Join(t.TempDir(), "tools.yaml"), dataKey: datakey.Generate()}
	require.NoError(t, os.WriteFile(c.tools, []byte(exportToolsYAML), 0o600))
	db, dialect, err := models.Open(ctx, c.dsn)
	require.NoError(t, err)
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	require.NoError(t, models.Migrate(ctx, db, dialect))
	c.l = models.New(models.Config{DB: db, Dialect: dialect})
	for i, tenant := range []string{"acme", "globex"} {
		_, err := c.l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, tenant)
		require.NoError(t, err)
		k, err := c.l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, tenant, "agent", nil)
		require.NoError(t, err)
		caller, err := c.l.Authenticate(ctx, k.Secret)
		require.NoError(t, err)
		for j := range 2 + i {
			_, err := c.l.Submit(ctx, models.NewOperation{Tenant: tenant, PrincipalID: caller.PrincipalID, APIKeyID: caller.Key.ID,
				Key: "k" + string(rune('a'+j)), Tool: "payments.charge", Fingerprint: "sha256:x",
				Params: []byte(`{"card_number":"` + cliCard + `","memo":"=1+1"}`), Actor: caller.Actor()})
			require.NoError(t, err)
		}
	}
	return c
}

// run runs one command against the ledger and returns what it printed.
func (c *cliLedger) run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vars := map[string]string{"IDEMGATE_DATABASE_URL": c.dsn, "IDEMGATE_TOOLS": c.tools, "IDEMGATE_DATA_KEY": c.dataKey}
	var out, errOut bytes.Buffer
	err = run(ctx, args, func(k string) string { return vars[k] }, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

// exportFile runs an NDJSON export into a file and returns its path.
func (c *cliLedger) exportFile(t *testing.T, args ...string) string {
	t.Helper()
	out, _, err := c.run(t, append([]string{"export", "--format", "ndjson"}, args...)...)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "export.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(out), 0o600))
	return path
}

func TestExportCommand(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		c := newCLILedger(t, d)
		t.Run("ndjson", func(t *testing.T) {
			out, stderr, err := c.run(t, "export", "--format", "ndjson")
			require.NoError(t, err)
			assert.NotContains(t, out, cliCard)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Len(t, lines, 7, "5 operations, the trailer and its signature")
			for _, l := range lines {
				assert.True(t, json.Valid([]byte(l)), l)
			}
			assert.Contains(t, lines[5], `"principal_id":"cli"`)
			assert.Equal(t, `{"key_id":"","signature":""}`, lines[6], "no signing key: the export says it is unsigned")
			assert.Contains(t, stderr, "exported 5 operations")
		})
		t.Run("csv with every filter", func(t *testing.T) {
			today := time.Now().UTC().Format(time.DateOnly)
			out, _, err := c.run(t, "export", "--format", "csv", "--tenant", "globex", "--state", "pending",
				"--tool", "payments.charge", "--from", "2020-01-01", "--to", today)
			require.NoError(t, err)
			assert.NotContains(t, out, cliCard)
			rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			require.NoError(t, err)
			require.Len(t, rows, 1+3+2, "header, one created event for each of globex's 3 operations, trailer, signature")
			for _, r := range rows[1:4] {
				assert.Equal(t, "globex", r[1])
			}
			assert.Equal(t, "#chain_head", rows[4][0])
			assert.Equal(t, "#signature", rows[5][0])
		})
		t.Run("an RFC 3339 range that excludes everything", func(t *testing.T) {
			out, stderr, err := c.run(t, "export", "--format", "ndjson", "--from", "2020-01-01T00:00:00Z", "--to", "2020-01-02T00:00:00+02:00")
			require.NoError(t, err)
			assert.Equal(t, 2, strings.Count(out, "\n"), "the trailer and its signature alone")
			assert.Contains(t, stderr, "exported 0 operations")
		})
		for name, args := range map[string][]string{
			"no format":      {},
			"unknown format": {"--format", "xml"},
			"bad from":       {"--format", "csv", "--from", "yesterday"},
			"bad to":         {"--format", "csv", "--to", "2026-13-01"},
			"unknown state":  {"--format", "csv", "--state", "DONE"},
			"unknown tenant": {"--format", "csv", "--tenant", "initech"},
			"empty range":    {"--format", "csv", "--from", "2026-02-01", "--to", "2026-01-01"},
			"extra argument": {"--format", "csv", "acme"},
		} {
			t.Run(name, func(t *testing.T) {
				out, _, err := c.run(t, append([]string{"export"}, args...)...)
				require.Error(t, err)
				assert.Empty(t, out)
			})
		}
	})
}

// TestExportNeedsNoCredentials (issue 50 item 17): an export sends nothing downstream, so the
// tools file's connections need none of their credentials: an auditor runs it without the
// billing token ({env: …} unset, a {file: …} and a client key that are not there), and still
// gets the file's masking rules. serve, which sends, still refuses the same file.
func TestExportNeedsNoCredentials(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		c := newCLILedger(t, d)
		missing := filepath.Join(t.TempDir(), "absent")
		withConns := `connections:
  - name: billing
    base_url: https://billing.example
    auth: {bearer: {env: BILLING_TOKEN}}
  - name: ledger
    base_url: https://ledger.example
    auth: {header: {name: X-Api-Key, value: {file: ` + missing + `}}}
    tls: {cert_file: ` + missing + `.crt, key_file: ` + missing + `.key}
` + strings.Replace(exportToolsYAML, "      url: http://127.0.0.1:9/charge", "      connection: billing\n      url: /charge", 1)
		require.NoError(t, os.WriteFile(c.tools, []byte(withConns), 0o600))

		out, stderr, err := c.run(t, "export", "--format", "ndjson")
		require.NoError(t, err, stderr)
		assert.NotContains(t, out, cliCard, "the file's masking rules apply")
		assert.Contains(t, stderr, "exported 5 operations")

		_, err = catalog.LoadFileWith(c.tools, catalog.Options{Getenv: func(string) string { return "" }})
		require.Error(t, err, "a command that sends still needs the credentials")
		assert.Contains(t, err.Error(), "BILLING_TOKEN")
	})
}
