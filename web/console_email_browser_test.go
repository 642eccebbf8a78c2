package web_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mailpit runs Mailpit, a real SMTP server whose HTTP API lists what it received, on free
// loopback ports, with STARTTLS required (a certificate made for the test) and any login
// accepted. It returns the SMTP URL's host:port, the API's base URL and the TLS configuration
// that trusts it. Without the binary the test is skipped on a workstation and fails in CI.
func mailpit(t *testing.T) (smtpAddr, api string, trust *tls.Config) {
	t.Helper()
	bin, err := exec.LookPath("mailpit")
	if err != nil {
		if gopath, gerr := exec.Command("go", "env", "GOPATH").Output(); gerr == nil {
			if p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "mailpit"); fileExists(p) {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("mailpit not installed: go install github.com/axllent/mailpit@v1.33.1")
		}
		t.Fatalf("mailpit not installed, and CI must run the email test: %v", err)
	}
	dir := t.TempDir()
	certPEM, keyPEM, pool := selfSigned(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), keyPEM, 0o600))
	// Mailpit checks the login against this file, so a wrong password fails the test.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "auth"), []byte(mailpitUser+":"+mailpitPassword+"\n"), 0o600))
	smtpAddr, httpAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "--smtp", smtpAddr, "--listen", httpAddr, "--database", filepath.Join(dir, "mail.db"),
		"--smtp-tls-cert", filepath.Join(dir, "cert.pem"), "--smtp-tls-key", filepath.Join(dir, "key.pem"), "--smtp-require-starttls",
		"--smtp-auth-file", filepath.Join(dir, "auth"), "--disable-version-check", "--quiet")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	api = "http://" + httpAddr
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := http.Get(api + "/api/v1/messages"); err == nil {
			resp.Body.Close()
			break
		}
		require.True(t, time.Now().Before(deadline), "mailpit did not start")
		time.Sleep(50 * time.Millisecond)
	}
	return smtpAddr, api, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// The SMTP login Mailpit accepts.
const mailpitUser, mailpitPassword = "idemgate", "mail-password"

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// selfSigned makes a certificate for 127.0.0.1 and the pool that trusts it.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailpit"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), pool
}

// received is what Mailpit's API says it received: each message's recipients, subject and id.
type received struct {
	ID      string `json:"ID"`
	Subject string `json:"Subject"`
	To      []struct {
		Address string `json:"Address"`
	} `json:"To"`
}

func inbox(t *testing.T, api string) []received {
	t.Helper()
	resp, err := http.Get(api + "/api/v1/messages?limit=200")
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Messages []received `json:"messages"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Messages
}

func messageText(t *testing.T, api, id string) string {
	t.Helper()
	resp, err := http.Get(api + "/api/v1/message/" + id)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m struct {
		Text string `json:"Text"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	return m.Text
}

// A refund turns UNKNOWN and its review opens: each reviewer and admin of acme who has not muted
// email gets one message through a real SMTP server (STARTTLS, a login), with the summary, why a
// person is needed and the link, never the card number; the muted reviewer, globex's reviewer and
// the auditor get none, and however long the mailer runs, nobody gets two. Rita follows the link:
// the console asks her to sign in, then shows the operation.
func TestBrowserEmailToReviewers(t *testing.T) {
	t.Parallel()
	smtpAddr, api, trust := mailpit(t)
	u, err := jobs.ParseSMTPURL("smtp://" + mailpitUser + "@" + smtpAddr)
	require.NoError(t, err)
	// The password from a mounted secret (--smtp-password-file), read for every session.
	passwordFile := filepath.Join(t.TempDir(), "smtp-password")
	require.NoError(t, os.WriteFile(passwordFile, []byte(mailpitPassword+"\n"), 0o600))
	con := consoletest.Start(t, models.Postgres, consoletest.Options{Mail: &jobs.MailerConfig{SMTP: u, PasswordFile: passwordFile,
		From: "idemgate <idemgate@example.com>", Every: 50 * time.Millisecond, TLS: trust}})
	con.Tenant(t, "acme")
	con.Tenant(t, "globex")
	ritaPW := con.User(t, "rita@example.com", models.RoleReviewer, "acme")
	con.User(t, "ravi@example.com", models.RoleReviewer, "acme")
	con.User(t, "ada@example.com", models.RoleAdmin)
	con.User(t, "bob@example.com", models.RoleReviewer, "globex")
	con.User(t, "audrey@example.com", models.RoleAuditor, "acme")
	// Mo mutes email through the queue's form.
	mo := con.NewBrowser(t)
	moPW := con.User(t, "mo@example.com", models.RoleReviewer, "acme")
	mo.MustLogin(t, "mo@example.com", moPW)
	page := mo.Get(t, "/reviews")
	require.Equal(t, http.StatusOK, page.Status)
	require.Equal(t, []string{"each"}, selected(page, "email-select"))
	require.Equal(t, http.StatusSeeOther, mo.Post(t, "/reviews/email", url.Values{"email": {"off"}}).Status)
	assert.Equal(t, []string{"off"}, selected(mo.Get(t, "/reviews"), "email-select"))
	// Dee takes an hourly digest: her reviews wait for the next full hour, then come in one message.
	dee := con.NewBrowser(t)
	deePW := con.User(t, "dee@example.com", models.RoleReviewer, "acme")
	dee.MustLogin(t, "dee@example.com", deePW)
	dee.Get(t, "/reviews")
	require.Equal(t, http.StatusSeeOther, dee.Post(t, "/reviews/email", url.Values{"email": {"digest"}}).Status)

	refund := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1044:refund", Tool: "refunds.issue",
		Params: `{"amount_cents":4200,"card_number":"4111111111111111","currency":"EUR","order_id":"1044"}`, Unknown: true, Review: true})
	var got []received
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 3 && time.Now().Before(deadline) {
		// (the digest's hour has not come: the clock stands still)
		time.Sleep(100 * time.Millisecond)
		got = inbox(t, api)
	}
	time.Sleep(500 * time.Millisecond) // ten more rounds of the mailer: nothing more may come
	got = inbox(t, api)
	var to []string
	for _, m := range got {
		for _, a := range m.To {
			to = append(to, a.Address)
		}
		assert.Contains(t, m.Subject, "A review needs a person: \u201c42.00 EUR to order 1044\u201d")
	}
	slices.Sort(to)
	assert.Equal(t, []string{"ada@example.com", "ravi@example.com", "rita@example.com"}, to,
		"acme's reviewers and the admin, once each; not the muted one, globex's or the auditor")
	var ritas string
	for _, m := range got {
		if m.To[0].Address == "rita@example.com" {
			ritas = messageText(t, api, m.ID)
		}
	}
	assert.Contains(t, ritas, "It is not known whether the call took effect")
	assert.NotContains(t, ritas, "4111111111111111")
	link := regexp.MustCompile(`Open it: (\S+)`).FindStringSubmatch(ritas)
	require.Len(t, link, 2, "the message links to the operation: %s", ritas)
	assert.Equal(t, con.URL+"/operations/"+refund.ID, link[1])
	rec, err := con.Ledger.OperationRecord(t.Context(), models.AllTenants(), refund.ID)
	require.NoError(t, err)
	emails, err := con.Ledger.Emails(t.Context(), *rec.Op.ReviewID)
	require.NoError(t, err)
	assert.Len(t, emails, 4, "Dee's too, for her digest")
	for _, e := range emails {
		want := models.EmailSent
		if e.Recipient == "dee@example.com" {
			want = models.EmailPending
			assert.True(t, e.Digest)
		}
		assert.Equal(t, want, e.Status, "%s: %v", e.Recipient, e.LastError)
	}

	// A second review in the same hour; then the hour ends, and Dee gets one message with both.
	second := con.Operation(t, consoletest.Seed{Tenant: "acme", Key: "order-1045:refund", Tool: "refunds.issue",
		Params: `{"amount_cents":5000,"currency":"EUR","order_id":"1045"}`, Unknown: true, Review: true})
	deadline = time.Now().Add(30 * time.Second)
	for len(inbox(t, api)) < 6 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	require.Len(t, inbox(t, api), 6, "three more single messages; Dee's wait for the hour")
	con.Clock.Advance(time.Hour)
	var digest []received
	deadline = time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		digest = nil
		for _, m := range inbox(t, api) {
			if m.To[0].Address == "dee@example.com" {
				digest = append(digest, m)
			}
		}
		if len(digest) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Len(t, digest, 1, "one digest")
	assert.Contains(t, digest[0].Subject, "2 reviews need a person")
	text := messageText(t, api, digest[0].ID)
	assert.Contains(t, text, con.URL+"/operations/"+refund.ID)
	assert.Contains(t, text, con.URL+"/operations/"+second.ID)
	assert.Contains(t, text, "50.00 EUR to order 1045")

	ctx := browser(t)
	run(t, ctx, chromedp.Navigate(link[1]), chromedp.WaitVisible(testID("login-form")))
	run(t, ctx, chromedp.SendKeys(testID("login-email"), "rita@example.com"), chromedp.SendKeys(testID("login-password"), ritaPW),
		chromedp.Click(testID("login-submit")), chromedp.WaitVisible(stateBadge))
	assert.Equal(t, link[1], value(t, ctx, chromedp.Location()), "signed in, on the operation the email named")
	assert.Equal(t, "Outcome unknown", value(t, ctx, chromedp.Text(stateBadge)))
}

// selected is the value of the chosen option of the select with that data-testid.
func selected(p *consoletest.Page, testid string) []string {
	i := strings.Index(p.Body, `data-testid="`+testid+`"`)
	if i < 0 {
		return nil
	}
	end := strings.Index(p.Body[i:], "</select>")
	m := regexp.MustCompile(`<option value="([^"]*)" selected`).FindStringSubmatch(p.Body[i : i+end])
	if m == nil {
		return nil
	}
	return []string{m[1]}
}
