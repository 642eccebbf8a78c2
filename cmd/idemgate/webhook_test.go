package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	webhookIDRE     = regexp.MustCompile(`webhook (whk_\S+) created`)
	webhookSecretRE = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`)
)

func TestWebhookCommands(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		dsn := migratedDSN(t, d)
		require.NoError(t, runCommand(t, dsn, "tenant", "create", "acme").err)

		t.Run("private targets are refused", func(t *testing.T) {
			for _, url := range []string{"http://127.0.0.1:9000/hook", "http://localhost:9000/hook", "http://10.0.0.8/",
				"http://169.254.169.254/latest", "http://[::1]/"} {
				r := runCommand(t, dsn, "webhook", "create", "--tenant", "acme", "--url", url, "--events", "operation.succeeded")
				require.Error(t, r.err, url)
				assert.Contains(t, r.err.Error(), "--allow-private", url)
				assert.NotContains(t, r.stdout, "whsec_")
			}
		})
		t.Run("bad URLs, events and tenants are refused", func(t *testing.T) {
			for _, args := range [][]string{
				{"--tenant", "acme", "--url", "ftp://127.0.0.1/", "--events", "operation.succeeded", "--allow-private"},
				{"--tenant", "acme", "--url", "http://127.0.0.1/", "--events", "operation.exploded", "--allow-private"},
				{"--tenant", "nope", "--url", "http://127.0.0.1/", "--events", "operation.succeeded", "--allow-private"},
				{"--tenant", "acme", "--url", "http://127.0.0.1/"},
				{"--tenant", "acme", "--url", "http://127.0.0.1/", "--events", "operation.succeeded", "--bogus"},
			} {
				r := runCommand(t, dsn, append([]string{"webhook", "create"}, args...)...)
				assert.Error(t, r.err, "%v", args)
				assert.NotContains(t, r.stdout, "whsec_")
			}
		})
		var id, secret string
		t.Run("loopback with --allow-private prints the secret once", func(t *testing.T) {
			r := runCommand(t, dsn, "webhook", "create", "--tenant", "acme", "--url", "http://127.0.0.1:9000/hook",
				"--events", "operation.succeeded,review.opened", "--allow-private")
			require.NoError(t, r.err, r.stderr)
			m := webhookIDRE.FindStringSubmatch(r.stdout)
			require.NotNil(t, m, r.stdout)
			id, secret = m[1], webhookSecretRE.FindString(r.stdout)
			key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
			require.NoError(t, err)
			assert.Len(t, key, 32)
			assert.Contains(t, r.stdout, "operation.succeeded,review.opened")
		})
		t.Run("list shows it without the secret", func(t *testing.T) {
			r := runCommand(t, dsn, "webhook", "list", "--tenant", "acme")
			require.NoError(t, r.err, r.stderr)
			assert.Contains(t, r.stdout, id)
			assert.Contains(t, r.stdout, "http://127.0.0.1:9000/hook")
			assert.Contains(t, r.stdout, "allowed")
			assert.NotContains(t, r.stdout, secret)
			assert.NotContains(t, r.stdout, "whsec_")
			r = runCommand(t, dsn, "webhook", "list", "--tenant", "other")
			require.NoError(t, r.err)
			assert.NotContains(t, r.stdout, id)
		})
		t.Run("delete, then again", func(t *testing.T) {
			r := runCommand(t, dsn, "webhook", "delete", id)
			require.NoError(t, r.err, r.stderr)
			assert.Contains(t, r.stdout, "deleted")
			require.Error(t, runCommand(t, dsn, "webhook", "delete", id).err)
			r = runCommand(t, dsn, "webhook", "list")
			require.NoError(t, r.err)
			assert.NotContains(t, r.stdout, id)
			require.Error(t, runCommand(t, dsn, "webhook", "rotate").err)
			require.Error(t, runCommand(t, dsn, "webhook").err)
		})
	})
}

// TestServeDeliversWebhooks subscribes a receiver on loopback to the demo tenant, runs a refund
// through `serve`, and checks what arrives: signed, masked, and the operation as the API has it.
func TestServeDeliversWebhooks(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		dsn := migratedDSN(t, d)
		var mu sync.Mutex
		var bodies [][]byte
		var secret string
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			defer mu.Unlock()
			key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
			mac := hmac.New(sha256.New, key)
			mac.Write([]byte(r.Header.Get("webhook-id") + "." + r.Header.Get("webhook-timestamp") + "." + string(body)))
			if r.Header.Get("webhook-signature") != "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)) {
				http.Error(w, "bad signature", http.StatusUnauthorized)
				return
			}
			bodies = append(bodies, body)
		}))
		defer rcv.Close()

		s := startServe(t, dsn)
		r := runCommand(t, dsn, "webhook", "create", "--tenant", "demo", "--url", rcv.URL, "--events", "operation.succeeded", "--allow-private")
		require.NoError(t, r.err, r.stderr)
		mu.Lock()
		secret = webhookSecretRE.FindString(r.stdout)
		mu.Unlock()

		client := &http.Client{Timeout: 30 * time.Second}
		refund := `{"tool":"refunds.issue","params":{"order_id":"77","amount_cents":500,"currency":"EUR","card_number":"4000056655665556"}}`
		a := s.do(t, client, http.MethodPost, "/v1/operations",
			map[string]string{"Authorization": "Bearer " + s.apiKey, "Idempotency-Key": "order-77:refund", "Content-Type": "application/json"}, refund)
		require.Equal(t, http.StatusCreated, a.status, string(a.body))

		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			n := len(bodies)
			mu.Unlock()
			if n > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, bodies, 1, "serve runs the publisher; stderr:\n%s", s.stderr)
		assert.NotContains(t, string(bodies[0]), "4000056655665556")
		var p struct {
			Type string `json:"type"`
			Data struct {
				Operation json.RawMessage `json:"operation"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(bodies[0], &p))
		assert.Equal(t, "operation.succeeded", p.Type)
		assert.JSONEq(t, string(a.body), string(p.Data.Operation), "the operation object is the API's, masked alike")
		client.CloseIdleConnections()
		s.stop(t)
	})
}

// TestWebhookFormatCommands: webhook create --format and --routing-key (a reference, only to
// what the operator set aside) or --routing-key-stdin (the key, sealed), list's FORMAT
// column, and webhook test queueing one test event. Both engines.
func TestWebhookFormatCommands(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		dsn := migratedDSN(t, d)
		require.NoError(t, runCommand(t, dsn, "tenant", "create", "acme").err)
		r := runCommand(t, dsn, "webhook", "create", "--tenant", "acme", "--url", "http://127.0.0.1:9/pd", "--events", "review.opened,review.resolved",
			"--format", "pagerduty", "--routing-key", "env:IDEMGATE_WEBHOOK_PAGERDUTY", "--allow-private")
		require.NoError(t, r.err)
		assert.Contains(t, r.stdout, "routing key: read from env:IDEMGATE_WEBHOOK_PAGERDUTY")
		id := webhookIDRE.FindStringSubmatch(r.stdout)[1]
		for _, ref := range []string{"env:IDEMGATE_DATA_KEY", "file:/proc/self/environ", "tenant:stripe_key"} {
			r = runCommand(t, dsn, "webhook", "create", "--tenant", "acme", "--url", "http://127.0.0.1:9/pd", "--events", "review.opened",
				"--format", "pagerduty", "--routing-key", ref, "--allow-private")
			require.Error(t, r.err, "%s is not set aside for notifications", ref)
			assert.Contains(t, r.err.Error(), "not set aside for notifications", ref)
		}
		r = runStdin(t, dsn, map[string]string{"IDEMGATE_NOTIFY_ENV_PREFIX": "PAGER_"}, "", "webhook", "create", "--tenant", "acme",
			"--url", "http://127.0.0.1:9/pd", "--events", "review.opened", "--format", "pagerduty", "--routing-key", "env:PAGER_ROUTING_KEY", "--allow-private")
		require.NoError(t, r.err, "the operator chose the prefix")
		r = runStdin(t, dsn, nil, "R0UT1NGK3Y0F4CME\n", "webhook", "create", "--tenant", "acme", "--url", "http://127.0.0.1:9/pd",
			"--events", "review.opened", "--format", "pagerduty", "--routing-key-stdin", "--allow-private")
		require.Error(t, r.err, "a key is sealed under the data key, never stored in clear")
		r = runStdin(t, dsn, map[string]string{"IDEMGATE_DATA_KEY": datakey.Generate()}, "R0UT1NGK3Y0F4CME\n", "webhook", "create", "--tenant", "acme",
			"--url", "http://127.0.0.1:9/pd", "--events", "review.opened", "--format", "pagerduty", "--routing-key-stdin", "--allow-private")
		require.NoError(t, r.err)
		assert.Contains(t, r.stdout, "routing key: •••• 4CME (sealed)")
		assert.NotContains(t, r.stdout, "R0UT1NGK3Y")
		r = runCommand(t, dsn, "webhook", "create", "--tenant", "acme", "--url", "http://127.0.0.1:9/pd", "--events", "review.opened",
			"--format", "pagerduty", "--allow-private")
		require.Error(t, r.err, "pagerduty needs a routing key reference")
		r = runCommand(t, dsn, "webhook", "create", "--tenant", "acme", "--url", "http://127.0.0.1:9/x", "--events", "review.opened",
			"--format", "carrier-pigeon", "--allow-private")
		require.Error(t, r.err)
		r = runCommand(t, dsn, "webhook", "list")
		require.NoError(t, r.err)
		assert.Contains(t, r.stdout, "FORMAT")
		assert.Contains(t, r.stdout, "pagerduty")
		assert.NotContains(t, r.stdout, "IDEMGATE_WEBHOOK_PAGERDUTY", "the list shows the format, not where the key is")
		r = runCommand(t, dsn, "webhook", "test", id)
		require.NoError(t, r.err)
		assert.Contains(t, r.stdout, "test event msg_")
		require.Error(t, runCommand(t, dsn, "webhook", "test", "whk_nope").err)
	})
}
