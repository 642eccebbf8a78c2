// Package auditdoc runs docs/AUDIT.md's verification, as the page writes it, on exports made by
// the real idemgate binary: the commands are read from the page, so the page cannot drift from
// what passes. A genuine export must pass; a forged one must fail, and fail where the page says.
package auditdoc

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bin is the idemgate binary, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	path, cleanup, err := proctest.Build(false) // the page's commands are what is tested, not races
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/auditdoc: building idemgate:", err)
		os.Exit(1)
	}
	bin = path
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// docBlocks returns the fenced code blocks of docs/AUDIT.md that follow an
// "<!-- audit-doc: NAME -->" marker, by name.
func docBlocks(t *testing.T) map[string]string {
	t.Helper()
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "AUDIT.md"))
	require.NoError(t, err)
	re := regexp.MustCompile("(?s)<!-- audit-doc: (\\S+) -->\\n```[a-z]*\\n(.*?)\\n```")
	blocks := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(page), -1) {
		blocks[m[1]] = m[2] + "\n"
	}
	require.Contains(t, blocks, "check.py")
	require.Contains(t, blocks, "verify.sh")
	// A script to save and run, not lines to paste: its set -eu would close the reader's
	// terminal at the first failed check (issue 50 item 16).
	require.True(t, strings.HasPrefix(blocks["verify.sh"], "#!/bin/sh\n"), "verify.sh is a script")
	require.Contains(t, string(page), "`sh verify.sh FILE KEYFILE`", "the page says how to run it")
	return blocks
}

// tools fails the test without openssl and python3 (a skip would let CI pass untested).
func tools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"openssl", "python3", "sha256sum", "base64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("docs/AUDIT.md's verification needs %s: %v", tool, err)
		}
	}
}

// auditor is a directory with the page's check.py and verify.sh and the key file.
type auditor struct {
	dir, keyFile string
}

// verify runs the page's verify.sh on file and returns its output and whether it passed.
func (a auditor) verify(t *testing.T, file []byte) (string, bool) {
	t.Helper()
	path := filepath.Join(a.dir, fmt.Sprintf("export-%d", time.Now().UnixNano()))
	require.NoError(t, os.WriteFile(path, file, 0o600))
	// Run as the page says: a saved script, the export and the key file its arguments, with
	// nothing set in the environment for it (issue 50 item 16).
	cmd := exec.Command("sh", "verify.sh", path, a.keyFile)
	cmd.Dir = a.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FILE=") && !strings.HasPrefix(kv, "KEYFILE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// keyPEM is the key check.py printed in the last run: it printed one only if every check of
// its own passed.
func (a auditor) keyPEM(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(a.dir, "key.pem"))
	require.NoError(t, err)
	return string(b)
}

func TestAuditDocVerification(t *testing.T) {
	tools(t)
	blocks := docBlocks(t)
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		env := []string{"IDEMGATE_DATABASE_URL=" + testdb.DSN(t, d), "IDEMGATE_DATA_KEY=" + datakey.Generate(), "IDEMGATE_LOG_LEVEL=warn"}
		idemgate := func(args ...string) []byte {
			t.Helper()
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, "idemgate %s: %s", strings.Join(args, " "), stderr.String())
			return out
		}
		idemgate("migrate")
		seedLedger(t, ctx, strings.TrimPrefix(env[0], "IDEMGATE_DATABASE_URL="))
		idemgate("audit", "key", "generate")
		a := auditor{dir: t.TempDir()}
		a.keyFile = filepath.Join(a.dir, "keys.json")
		require.NoError(t, os.WriteFile(a.keyFile, idemgate("audit", "key", "list"), 0o600))
		for name, code := range blocks {
			require.NoError(t, os.WriteFile(filepath.Join(a.dir, name), []byte(code), 0o600))
		}
		ndjson := idemgate("export", "--format", "ndjson", "--tenant", "acme")
		csvFile := idemgate("export", "--format", "csv")
		auditLog := idemgate("audit", "export")
		require.True(t, strings.HasPrefix(string(auditLog), `{"event_id":"1",`))
		require.Contains(t, strings.SplitN(string(auditLog), "\n", 2)[0], `"event_hash":"sha256:`,
			"the log starts with a legacy entry: check.py's legacy form is exercised")

		for name, file := range map[string][]byte{"ndjson": ndjson, "csv": csvFile, "audit log": auditLog} {
			t.Run("genuine "+name+" passes", func(t *testing.T) {
				out, ok := a.verify(t, file)
				assert.True(t, ok, out)
				assert.Contains(t, out, "Signature Verified Successfully")
			})
		}
		t.Run("an amount changed fails the digest", func(t *testing.T) {
			out, ok := a.verify(t, bytes.Replace(ndjson, []byte(`"amount":1999`), []byte(`"amount":9999`), 1))
			assert.False(t, ok)
			assert.Contains(t, out, "do not hash to export_sha256")
		})
		t.Run("an amount changed and everything recomputed fails the signature", func(t *testing.T) {
			out, ok := a.verify(t, forge(t, ndjson, func(ls [][]byte) {
				require.Contains(t, string(ls[0]), `"amount":1999`)
				ls[0] = bytes.Replace(ls[0], []byte(`"amount":1999`), []byte(`"amount":9999`), 1)
			}))
			assert.False(t, ok)
			assert.Contains(t, a.keyPEM(t), "BEGIN PUBLIC KEY", "check.py passed: the forgery is consistent")
			assert.Contains(t, out, "Signature Verification Failure", "openssl is what refuses it")
		})
		t.Run("a forgery re-signed with another key fails though the key file's pem is swapped", func(t *testing.T) {
			// The security review's forgery (issue 47, finding 4): the export re-signed with an
			// attacker's key, and a key file that keeps the genuine key_id and public_key but
			// carries the attacker's pem. The page's check derives the key from public_key.
			forged := forge(t, ndjson, func(ls [][]byte) {
				ls[0] = bytes.Replace(ls[0], []byte(`"amount":1999`), []byte(`"amount":9999`), 1)
			})
			pub, priv, err := ed25519.GenerateKey(nil)
			require.NoError(t, err)
			ls := bytes.SplitAfter(forged, []byte("\n"))
			ls = ls[:len(ls)-1]
			var sig map[string]string
			require.NoError(t, json.Unmarshal(ls[len(ls)-1], &sig))
			sig["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(priv, ls[len(ls)-2]))
			ls[len(ls)-1] = mustLine(t, sig)
			forged = bytes.Join(ls, nil)

			der, err := x509.MarshalPKIXPublicKey(pub)
			require.NoError(t, err)
			var keys struct {
				Keys []map[string]any `json:"keys"`
			}
			genuine, err := os.ReadFile(a.keyFile)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(genuine, &keys))
			for _, k := range keys.Keys {
				if k["key_id"] == sig["key_id"] {
					k["pem"] = string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
				}
			}
			swapped := auditor{dir: a.dir, keyFile: filepath.Join(a.dir, "swapped-keys.json")}
			require.NoError(t, os.WriteFile(swapped.keyFile, mustLine(t, keys), 0o600))

			out, ok := swapped.verify(t, forged)
			assert.False(t, ok, "the swapped pem must not vouch for the forgery:\n%s", out)
			assert.NotContains(t, out, "Signature Verified Successfully")
			path := filepath.Join(t.TempDir(), "forged")
			require.NoError(t, os.WriteFile(path, forged, 0o600))
			cmd := exec.Command(bin, "audit", "verify", "--export", path, "--key", swapped.keyFile)
			cmd.Env = append(os.Environ(), env...)
			got, err := cmd.CombinedOutput()
			assert.Error(t, err, "idemgate audit verify refuses it too: %s", got)
		})
		t.Run("an audit entry changed and the chain recomputed fails the signature", func(t *testing.T) {
			out, ok := a.verify(t, forge(t, auditLog, func(ls [][]byte) {
				prev := ""
				for i := range ls {
					var r models.AuditRecord
					require.NoError(t, json.Unmarshal(ls[i], &r))
					e, err := r.Entry()
					require.NoError(t, err)
					if i == 2 {
						e.Actor = "user:mallory@example.com"
					}
					if i > 0 {
						e.PrevHash = prev
					}
					if i >= 2 {
						e.Hash = e.ComputeHash()
					}
					prev = e.Hash
					ls[i] = mustLine(t, e.Record())
				}
			}))
			assert.False(t, ok)
			assert.Contains(t, a.keyPEM(t), "BEGIN PUBLIC KEY", "check.py passed: the chain is consistent")
			assert.Contains(t, out, "Signature Verification Failure")
		})
		t.Run("a signed checkpoint verifies as the page shows", func(t *testing.T) {
			out := string(idemgate("audit", "verify"))
			m := regexp.MustCompile(`(?m)^checkpoint (\{.*\})\nsignature (\S+)$`).FindStringSubmatch(out)
			require.NotNil(t, m, out)
			keyID := regexp.MustCompile(`"key_id":"([0-9a-f]{16})"`).FindStringSubmatch(m[1])
			require.NotNil(t, keyID)
			pem := idemgate("audit", "key", "list", "--pem", keyID[1])
			for statement, want := range map[string]string{m[1]: "Signature Verified Successfully",
				strings.Replace(m[1], `"seq":"`, `"seq":"9`, 1): "Signature Verification Failure"} {
				cmd := exec.Command("sh", "-c", `printf '%s' "$STATEMENT" > checkpoint.json
printf '%s' "$SIGNATURE" | base64 -d > checkpoint.sig
openssl pkeyutl -verify -pubin -inkey cp.pem -rawin -in checkpoint.json -sigfile checkpoint.sig`)
				cmd.Dir = t.TempDir()
				require.NoError(t, os.WriteFile(filepath.Join(cmd.Dir, "cp.pem"), pem, 0o600))
				cmd.Env = append(os.Environ(), "STATEMENT="+statement, "SIGNATURE="+m[2])
				got, _ := cmd.CombinedOutput()
				assert.Contains(t, string(got), want, statement)
			}
		})
		t.Run("an audit entry changed, the digest recomputed but not the entry's hash", func(t *testing.T) {
			out, ok := a.verify(t, forge(t, auditLog, func(ls [][]byte) {
				ls[2] = bytes.Replace(ls[2], []byte(`"principal_id":"`), []byte(`"principal_id":"x`), 1)
			}))
			assert.False(t, ok)
			assert.Contains(t, out, "entry 3 does not match its hash")
		})
	})
}

// seedLedger writes, through the ledger's own functions, what the exports hold: an entry in
// the legacy hash form first (a ledger upgraded from before schema step 21), a tenant with an
// API key and two operations with amounts.
func seedLedger(t *testing.T, ctx context.Context, dsn string) {
	t.Helper()
	db, dialect, err := models.Open(ctx, dsn)
	require.NoError(t, err)
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	// What Go's encoder escapes and RFC 8785 does not (<, &, U+2028), and a time whose
	// trailing zeros the legacy form drops.
	legacy := &models.AuditEntry{Seq: 1, At: time.Date(2026, 11, 29, 9, 0, 0, 120000000, time.UTC), Actor: "cli\u2028",
		Action: models.AuditTenantCreate, Outcome: models.OutcomeOK, Detail: `{"name":"<old> & \u2028"}`,
		PrevHash: models.GenesisHash, Hash: "sha256:"}
	legacy.Hash = legacy.ComputeHash()
	require.NoError(t, db.Create(legacy).Error)
	l := models.New(models.Config{DB: db, Dialect: dialect})
	cli := models.Requester{Actor: models.ActorCLI}
	_, err = l.CreateTenant(ctx, models.AllTenants(), cli, "acme")
	require.NoError(t, err)
	k, err := l.CreateAPIKey(ctx, models.AllTenants(), cli, "acme", "agent", nil)
	require.NoError(t, err)
	caller, err := l.Authenticate(ctx, k.Secret)
	require.NoError(t, err)
	for i, params := range []string{`{"amount":1999,"currency":"EUR","order_id":"o-1"}`, `{"amount":5,"currency":"EUR","order_id":"o-2"}`} {
		_, err := l.Submit(ctx, models.NewOperation{Tenant: "acme", PrincipalID: caller.PrincipalID, APIKeyID: caller.Key.ID,
			Key: fmt.Sprintf("refund-%d", i), Tool: "refunds.issue", Fingerprint: "sha256:x", Params: []byte(params), Actor: caller.Actor()})
		require.NoError(t, err)
	}
}

// forge edits the body lines of an export with edit, then recomputes what vouches for them, as
// a forger without the key can: the digest, the export's audit entry and its hash, the chain
// head. The signature line is left as it was.
func forge(t *testing.T, file []byte, edit func(body [][]byte)) []byte {
	t.Helper()
	ls := bytes.SplitAfter(bytes.Clone(file), []byte("\n"))
	ls = ls[:len(ls)-1] // the empty piece after the last newline
	body := ls[:len(ls)-2]
	edit(body)
	sum := sha256.Sum256(bytes.Join(body, nil))
	digest := hex.EncodeToString(sum[:])
	var tr map[string]any
	require.NoError(t, json.Unmarshal(ls[len(ls)-2], &tr))
	raw, err := json.Marshal(tr["audit_entry"])
	require.NoError(t, err)
	var r models.AuditRecord
	require.NoError(t, json.Unmarshal(raw, &r))
	var detail map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Extensions.Idemgate.Detail), &detail))
	detail["export_sha256"] = digest
	b, err := json.Marshal(detail)
	require.NoError(t, err)
	e, err := r.Entry()
	require.NoError(t, err)
	e.Detail = string(b)
	e.Hash = e.ComputeHash()
	tr["audit_entry"], tr["export_sha256"] = e.Record(), digest
	tr["chain_head"] = map[string]any{"seq": e.Seq, "hash": e.Hash}
	ls[len(ls)-2] = mustLine(t, tr)
	return bytes.Join(ls, nil)
}

func mustLine(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return append(b, '\n')
}
