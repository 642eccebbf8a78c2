package web_test

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// auditDesk is a console with audit entries of acme, globex and no tenant, an admin of every
// tenant (Ada), an auditor limited to acme (Aude) and a reviewer (Rita).
type auditDesk struct {
	con             *consoletest.Console
	ada, aude, rita *consoletest.Browser
}

func newAuditDesk(t *testing.T, d models.Dialect) auditDesk {
	t.Helper()
	con := consoletest.Start(t, d, consoletest.Options{})
	con.Tenant(t, "acme")
	con.Tenant(t, "globex")
	signIn := func(email string, role models.Role, tenants ...string) *consoletest.Browser {
		pw := con.User(t, email, role, tenants...)
		b := con.NewBrowser(t)
		b.MustLogin(t, email, pw)
		b.Get(t, "/")
		return b
	}
	desk := auditDesk{con: con, ada: signIn("ada@example.com", models.RoleAdmin),
		aude: signIn("aude@example.com", models.RoleAuditor, "acme"), rita: signIn("rita@example.com", models.RoleReviewer)}
	for _, in := range []models.AuditInput{
		{Actor: "user:rita@example.com", Action: "review.approve", Tenant: "acme", OperationID: "op_acme", Outcome: "ok"},
		{Actor: "user:rita@example.com", Action: "review.reject", Tenant: "globex", OperationID: "op_globex", Outcome: "ok"},
		{Actor: "cli", Action: models.AuditTenantCreate, Tenant: "", Outcome: "ok"},
		{Actor: "api:billing-agent", Action: "request.key_mismatch", Tenant: "acme", Outcome: "refused"},
	} {
		_, err := con.Ledger.Audit(t.Context(), in)
		require.NoError(t, err)
	}
	return desk
}

func TestAuditPage(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newAuditDesk(t, d)
		ctx := t.Context()

		t.Run("newest first, with the chain head, never verified", func(t *testing.T) {
			p := desk.ada.Get(t, "/audit")
			require.Equal(t, http.StatusOK, p.Status)
			seq, hash, err := desk.con.Ledger.AuditHead(ctx)
			require.NoError(t, err)
			assert.Equal(t, []string{"entry " + strconv.FormatInt(seq, 10)}, p.TestIDs("audit-head-seq"))
			assert.Equal(t, []string{hash}, p.TestIDs("audit-head-hash"))
			assert.Equal(t, []string{"Never"}, p.TestIDs("audit-last-verified"))
			seqs := p.Attrs("audit-row", "data-seq")
			require.NotEmpty(t, seqs)
			assert.Equal(t, strconv.FormatInt(seq, 10), seqs[0], "newest first")
			assert.Contains(t, p.Attrs("audit-row", "data-tenant"), "globex")
		})
		t.Run("filters", func(t *testing.T) {
			p := desk.ada.Get(t, "/audit?action=review")
			assert.ElementsMatch(t, []string{"review.reject", "review.approve"}, p.Attrs("audit-row", "data-action"))
			p = desk.ada.Get(t, "/audit?action=review.approve&actor=rita@example.com")
			assert.Equal(t, []string{"review.approve"}, p.Attrs("audit-row", "data-action"))
			p = desk.ada.Get(t, "/audit?tenant=globex")
			assert.Equal(t, []string{"review.reject", models.AuditTenantCreate}, p.Attrs("audit-row", "data-action"),
				"the rejection, and the tenant's creation by the desk's set-up")
			p = desk.ada.Get(t, "/audit?actor=cli")
			assert.Equal(t, []string{models.AuditTenantCreate}, p.Attrs("audit-row", "data-action"))
			p = desk.ada.Get(t, "/audit?actor=nobody@example.com")
			assert.Len(t, p.TestIDs("audit-empty"), 1)
		})
		t.Run("a tenant-limited auditor sees only the entries of their tenants", func(t *testing.T) {
			p := desk.aude.Get(t, "/audit")
			require.Equal(t, http.StatusOK, p.Status)
			tenants := p.Attrs("audit-row", "data-tenant")
			require.NotEmpty(t, tenants)
			for _, tenant := range tenants {
				assert.Equal(t, "acme", tenant)
			}
			assert.Empty(t, desk.aude.Get(t, "/audit?tenant=globex").Attrs("audit-row", "data-seq"), "another tenant finds nothing")
			require.Len(t, p.TestIDs("audit-limited"), 1)
			assert.Contains(t, p.TestIDs("audit-limited")[0], "entry numbers skip", "the gaps in the numbers are explained")
			assert.Empty(t, desk.ada.Get(t, "/audit").TestIDs("audit-limited"), "an unlimited auditor sees every entry")
		})
		t.Run("pages", func(t *testing.T) {
			for i := range 60 {
				_, err := desk.con.Ledger.Audit(ctx, models.AuditInput{Actor: "cli", Action: "user.create", Tenant: "acme",
					Outcome: "ok", Detail: map[string]any{"n": i}})
				require.NoError(t, err)
			}
			p := desk.ada.Get(t, "/audit?actor=cli&action=user.create")
			first := p.Attrs("audit-row", "data-seq")
			assert.Len(t, first, 50)
			next := p.Attrs("next-page", "href")
			require.Len(t, next, 1)
			p = desk.ada.Get(t, next[0])
			second := p.Attrs("audit-row", "data-seq")
			assert.Len(t, second, 10)
			last, _ := strconv.Atoi(first[len(first)-1])
			top, _ := strconv.Atoi(second[0])
			assert.Equal(t, last-1, top, "the next page continues where the first ended")
		})
		t.Run("reviewers are refused", func(t *testing.T) {
			assert.Equal(t, http.StatusForbidden, desk.rita.Get(t, "/audit").Status)
			assert.Equal(t, http.StatusForbidden, desk.rita.Post(t, "/audit/verify", nil).Status)
		})
	})
}

// Issue 28, item 10: the audit page names an operation by its key (its id beside it), and
// says in one sentence why the chain's head is past the newest entry it lists: an older page,
// filters, or entries of other tenants (or of none) that the viewer does not see.
func TestAuditPageNamesOperationsAndTheHead(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newAuditDesk(t, d)
		ctx := t.Context()
		op := desk.con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1044:refund", Tool: "refunds.issue",
			Params: `{"amount_cents":4200,"currency":"EUR","order_id":"1044"}`, Unknown: true, Review: true})
		_, err := desk.con.Ledger.Audit(ctx, models.AuditInput{Actor: "user:rita@example.com", Action: "review.mark_failed",
			Tenant: "acme", OperationID: op.ID, Outcome: "ok"})
		require.NoError(t, err)
		acmeNewest, _, err := desk.con.Ledger.AuditHead(ctx)
		require.NoError(t, err)
		_, err = desk.con.Ledger.Audit(ctx, models.AuditInput{Actor: "cli", Action: models.AuditTenantCreate, Outcome: "ok"})
		require.NoError(t, err)
		head, _, err := desk.con.Ledger.AuditHead(ctx)
		require.NoError(t, err)
		h, n := strconv.FormatInt(head, 10), strconv.FormatInt(acmeNewest, 10)

		p := desk.ada.Get(t, "/audit")
		require.Equal(t, http.StatusOK, p.Status)
		assert.Empty(t, p.TestIDs("audit-head-note"), "the list starts at the head: nothing to explain")
		assert.Equal(t, "order-1044:refund", p.TestIDs("audit-operation")[0], "named by its key")
		assert.Equal(t, op.ID, p.Attrs("audit-operation", "title")[0], "its id beside it")
		assert.Contains(t, p.TestIDs("audit-operation"), "op_acme", "an operation the ledger does not hold keeps its id")

		p = desk.aude.Get(t, "/audit")
		assert.Equal(t, []string{"The head is entry " + h + "; the entries after " + n +
			" belong to other tenants or to none (such as sign-ins), which you do not see."}, p.TestIDs("audit-head-note"))
		assert.Equal(t, n, p.Attrs("audit-row", "data-seq")[0])

		p = desk.ada.Get(t, "/audit?action=review.approve")
		approved := p.Attrs("audit-row", "data-seq")
		require.Len(t, approved, 1)
		assert.Equal(t, []string{"The head is entry " + h + "; the newest entry that matches the filters is " + approved[0] + "."},
			p.TestIDs("audit-head-note"))
		p = desk.ada.Get(t, "/audit?actor=nobody@example.com")
		assert.Equal(t, []string{"The head is entry " + h + "; no entry matches the filters."}, p.TestIDs("audit-head-note"))
		p = desk.ada.Get(t, "/audit?before="+n)
		assert.Equal(t, []string{"This page lists older entries; the head, entry " + h + ", is on the first page."}, p.TestIDs("audit-head-note"))
	})
}

func TestAuditVerifyNow(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newAuditDesk(t, d)
		desk.aude.Get(t, "/audit")
		p := desk.aude.Post(t, "/audit/verify", nil)
		require.Equal(t, http.StatusSeeOther, p.Status)
		assert.Equal(t, "/audit", p.Header.Get("Location"))
		p = desk.aude.Get(t, "/audit")
		require.Len(t, p.TestIDs("notice"), 1)
		assert.Contains(t, p.TestIDs("notice")[0], "The chain holds")
		seq, _, err := desk.con.Ledger.AuditHead(t.Context())
		require.NoError(t, err)
		assert.Contains(t, p.TestIDs("audit-last-verified")[0], "Up to entry "+strconv.FormatInt(seq, 10))

		require.NoError(t, desk.con.Ledger.DB().Exec("UPDATE audit_log SET actor = 'user:mallory@example.com' WHERE seq = 2").Error)
		require.Equal(t, http.StatusSeeOther, desk.aude.Post(t, "/audit/verify", nil).Status)
		p = desk.aude.Get(t, "/audit")
		assert.Empty(t, p.TestIDs("notice"))
		require.Len(t, p.TestIDs("audit-broken"), 1)
		assert.Contains(t, p.TestIDs("audit-broken")[0], "The chain is broken at entry 2")
		assert.Contains(t, p.TestIDs("audit-broken")[0], "edited")
	})
}

func TestExportDownload(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		desk := newAuditDesk(t, d)
		var acme []string
		for i, tenant := range []string{"acme", "acme", "globex"} {
			op := desk.con.Operation(t, consoletest.Seed{Tenant: tenant, Key: tenant + "-" + strconv.Itoa(i), Tool: "refunds.issue",
				Params: `{"amount_cents":1,"card_number":"` + cardNumber + `","currency":"EUR","order_id":"1"}`, Unknown: true})
			if tenant == "acme" {
				acme = append(acme, op.ID)
			}
		}

		t.Run("the form", func(t *testing.T) {
			p := desk.aude.Get(t, "/exports")
			require.Equal(t, http.StatusOK, p.Status)
			assert.NotContains(t, p.Body, `<option value="globex"`, "no other tenant offered")
			assert.Equal(t, http.StatusForbidden, desk.rita.Get(t, "/exports").Status)
		})
		t.Run("CSV within scope", func(t *testing.T) {
			p := download(t, desk.aude, "format=csv")
			require.Equal(t, http.StatusOK, p.Status, p.Body)
			assert.Equal(t, "text/csv; charset=utf-8", p.Header.Get("Content-Type"))
			assert.Regexp(t, `^attachment; filename="idemgate-export-acme-\d{8}T\d{6}Z\.csv"$`, p.Header.Get("Content-Disposition"),
				"the auditor's one tenant names the file")
			rows, err := csv.NewReader(strings.NewReader(p.Body)).ReadAll()
			require.NoError(t, err)
			require.Greater(t, len(rows), 2)
			assert.Equal(t, "operation_id", rows[0][0])
			seen := map[string]bool{}
			for _, r := range rows[1 : len(rows)-2] {
				assert.Equal(t, "acme", r[1], "only the auditor's tenant")
				seen[r[0]] = true
			}
			assert.Len(t, seen, len(acme))
			assert.Equal(t, "#chain_head", rows[len(rows)-2][0])
			assert.Equal(t, "#signature", rows[len(rows)-1][0])
			assert.NotContains(t, p.Body, cardNumber)
		})
		t.Run("NDJSON of one tenant, recorded in the audit log", func(t *testing.T) {
			p := download(t, desk.ada, "format=ndjson&tenant=acme&state=UNKNOWN&tool=refunds.issue")
			require.Equal(t, http.StatusOK, p.Status, p.Body)
			assert.Equal(t, "application/x-ndjson", p.Header.Get("Content-Type"))
			var ids []string
			sc := bufio.NewScanner(strings.NewReader(p.Body))
			sc.Buffer(nil, 1<<20)
			var trailer, last map[string]any
			for sc.Scan() {
				trailer, last = last, nil
				require.NoError(t, json.Unmarshal(sc.Bytes(), &last))
				if id, ok := last["id"].(string); ok {
					ids = append(ids, id)
				}
			}
			assert.ElementsMatch(t, acme, ids)
			require.Contains(t, trailer, "chain_head", "the line before the last carries the chain head")
			require.Contains(t, last, "signature", "the last line signs it")
			assert.Contains(t, p.Header.Get("Content-Disposition"), `filename="idemgate-export-acme-`)
			entries, _, err := desk.con.Ledger.AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Action: "export.created", Limit: 1})
			require.NoError(t, err)
			require.Len(t, entries, 1)
			assert.Equal(t, "user:ada@example.com", entries[0].Actor)
			assert.Equal(t, "acme", entries[0].Tenant)
		})
		t.Run("a tenant outside the scope is 404", func(t *testing.T) {
			p := download(t, desk.aude, "format=csv&tenant=globex")
			assert.Equal(t, http.StatusNotFound, p.Status)
			assert.NotContains(t, p.Header.Get("Content-Disposition"), "attachment")
		})
		t.Run("a bad request answers the form", func(t *testing.T) {
			for _, q := range []string{"format=xml", "format=csv&from=yesterday", "format=csv&state=DONE",
				"format=csv&from=2026-01-02T00:00&to=2026-01-01T00:00"} {
				p := download(t, desk.aude, q)
				assert.Equal(t, http.StatusBadRequest, p.Status, q)
				assert.Len(t, p.TestIDs("export-form"), 1, q)
				assert.Empty(t, p.Header.Get("Content-Disposition"), q)
			}
		})
	})
}

// Every refusal worth investigating and every administrative change in the console writes its
// audit entry (docs/AUDIT.md).
func TestConsoleWritesAuditEntries(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con := consoletest.Start(t, d, consoletest.Options{Limits: models.LoginLimits{Window: 15 * time.Minute, PerEmailIP: 2, PerIP: 20, PerEmail: 50}})
		con.Tenant(t, "acme")
		adaPW := con.User(t, "ada@example.com", models.RoleAdmin)
		ritaPW := con.User(t, "rita@example.com", models.RoleReviewer)
		tinaPW := con.User(t, "tina@example.com", models.RoleAdmin, "acme")
		browser := func(email, pw string) *consoletest.Browser {
			b := con.NewBrowser(t)
			b.MustLogin(t, email, pw)
			b.Get(t, "/")
			return b
		}
		ada, rita, tina := browser("ada@example.com", adaPW), browser("rita@example.com", ritaPW), browser("tina@example.com", tinaPW)
		var keyID string
		cases := []struct {
			name    string
			do      func(t *testing.T) *consoletest.Page
			status  int
			actor   string
			action  string
			outcome string
			tenant  string
			detail  map[string]any
		}{
			{"tenant created", func(t *testing.T) *consoletest.Page {
				return ada.Post(t, "/admin/tenants", url.Values{"name": {"globex"}})
			}, http.StatusSeeOther, "user:ada@example.com", models.AuditTenantCreate, "ok", "globex", nil},
			{"API key created", func(t *testing.T) *consoletest.Page {
				return ada.Post(t, "/admin/keys", url.Values{"tenant": {"acme"}, "principal": {"billing-agent"}, "tools": {"refunds.issue"}})
			}, http.StatusSeeOther, "user:ada@example.com", models.AuditAPIKeyCreate, "ok", "acme",
				map[string]any{"principal": "billing-agent", "tools": "refunds.issue"}},
			{"API key revoked", func(t *testing.T) *consoletest.Page {
				keys, err := con.Ledger.APIKeys(t.Context(), models.AllTenants(), "")
				require.NoError(t, err)
				require.Len(t, keys, 1)
				keyID = keys[0].ID
				return ada.Post(t, "/admin/keys/"+keyID+"/revoke", nil)
			}, http.StatusSeeOther, "user:ada@example.com", models.AuditAPIKeyRevoke, "ok", "acme", nil},
			{"user created", func(t *testing.T) *consoletest.Page {
				return ada.Post(t, "/admin/users", url.Values{"email": {"una@example.com"}, "role": {"auditor"}, "tenants": {"acme"},
					"password": {"correct horse battery"}})
			}, http.StatusSeeOther, "user:ada@example.com", models.AuditUserCreate, "ok", "acme",
				map[string]any{"email": "una@example.com", "role": "auditor", "tenants": "acme"}},
			{"failed sign-in", func(t *testing.T) *consoletest.Page {
				return con.NewBrowser(t).Login(t, "Rita@example.com", "not the password at all")
			}, http.StatusUnauthorized, "anonymous:127.0.0.1", models.AuditLoginFailed, "refused", "",
				map[string]any{"email": "rita@example.com", "refusal": "wrong email or password"}},
			{"throttled sign-in", func(t *testing.T) *consoletest.Page {
				b := con.NewBrowser(t)
				b.Login(t, "rita@example.com", "not the password at all") // the second failure reaches the limit
				return b.Login(t, "rita@example.com", "not the password at all")
			}, http.StatusTooManyRequests, "anonymous:127.0.0.1", models.AuditLoginFailed, "refused", "",
				map[string]any{"email": "rita@example.com", "refusal": "too many failed sign-ins"}},
			{"CSRF token missing", func(t *testing.T) *consoletest.Page {
				return rita.Post(t, "/logout", url.Values{"csrf_token": {""}})
			}, http.StatusForbidden, "user:rita@example.com", models.AuditCSRFRefused, "refused", "",
				map[string]any{"path": "/logout", "refusal": "no CSRF token"}},
			{"CSRF token wrong, signed out", func(t *testing.T) *consoletest.Page {
				b := con.NewBrowser(t)
				b.Get(t, "/login")
				return b.Post(t, "/login", url.Values{"csrf_token": {"forged"}, "email": {"x@example.com"}, "password": {"y"}})
			}, http.StatusForbidden, "anonymous:127.0.0.1", models.AuditCSRFRefused, "refused", "",
				map[string]any{"path": "/login", "refusal": "wrong CSRF token"}},
			{"role refused", func(t *testing.T) *consoletest.Page {
				return rita.Get(t, "/admin")
			}, http.StatusForbidden, "user:rita@example.com", models.AuditForbidden, "refused", "",
				map[string]any{"path": "/admin", "role": "reviewer"}},
			{"tenant admin creating a tenant", func(t *testing.T) *consoletest.Page {
				return tina.Post(t, "/admin/tenants", url.Values{"name": {"initech"}})
			}, http.StatusForbidden, "user:tina@example.com", models.AuditForbidden, "refused", "",
				map[string]any{"path": "/admin/tenants", "role": "admin"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p := tc.do(t)
				require.Equal(t, tc.status, p.Status)
				entries, _, err := con.Ledger.AuditEntries(t.Context(), models.AllTenants(), models.AuditSearch{Limit: 1})
				require.NoError(t, err)
				require.Len(t, entries, 1)
				e := entries[0]
				assert.Equal(t, tc.actor, e.Actor)
				assert.Equal(t, tc.action, e.Action)
				assert.Equal(t, tc.outcome, e.Outcome)
				assert.Equal(t, tc.tenant, e.Tenant)
				assert.NotEmpty(t, e.RequestID, "the request id ties the entry to the server's log")
				var detail map[string]any
				if e.Detail != "" {
					require.NoError(t, json.Unmarshal([]byte(e.Detail), &detail))
				}
				for k, want := range tc.detail {
					assert.Equal(t, want, detail[k], "detail %s", k)
				}
				for _, secret := range []string{"not the password at all", "correct horse battery"} {
					assert.NotContains(t, e.Detail, secret, "never a password")
				}
			})
		}
		_, err := con.Ledger.VerifyAuditChain(t.Context())
		assert.NoError(t, err, "one unbroken chain")
	})
}

// download asks for an export the way the form does: a POST of query q with the page's CSRF
// token.
func download(t *testing.T, b *consoletest.Browser, q string) *consoletest.Page {
	t.Helper()
	form, err := url.ParseQuery(q)
	require.NoError(t, err)
	b.Get(t, "/exports")
	return b.Post(t, "/exports/download", form)
}

// TestAuditKeysArePublic: /audit/keys answers without a login, with every key's public half
// and validity, and nothing of a private half.
func TestAuditKeysArePublic(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		con := consoletest.Start(t, d, consoletest.Options{})
		anon := con.NewBrowser(t)
		p := anon.Get(t, "/audit/keys")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		assert.JSONEq(t, `{"keys":[]}`, p.Body, "no key yet")

		kr, err := datakey.Parse(datakey.Generate(), "")
		require.NoError(t, err)
		keyed := models.New(models.Config{DB: con.Ledger.DB(), Dialect: d, DataKeys: kr})
		made, err := keyed.GenerateAuditKey(t.Context(), models.Requester{Actor: models.ActorCLI})
		require.NoError(t, err)
		p = anon.Get(t, "/audit/keys")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		assert.Equal(t, "application/json", strings.Split(p.Header.Get("Content-Type"), ";")[0])
		set, err := models.ParseAuditKeySet([]byte(p.Body))
		require.NoError(t, err)
		require.Len(t, set.Keys, 1)
		assert.Equal(t, made.KeyID, set.Keys[0].KeyID)
		assert.Equal(t, made.PEM, set.Keys[0].PEM)
		assert.NotContains(t, p.Body, "sealed")
		assert.NotContains(t, p.Body, "PRIVATE")
	})
}
