package e2e_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testCA is a private certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idemgate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a certificate for cn signed by the CA, as PEM certificate and key.
func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage, ips ...net.IP) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, IPAddresses: ips,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

const mtlsTools = `
connections:
  - name: bank
    base_url: {{DOWN}}
    tls: {ca_file: {{DIR}}/ca.pem, cert_file: {{DIR}}/client.pem, key_file: {{DIR}}/client-key.pem}
  - name: bank-nocert
    base_url: {{DOWN}}
    tls: {ca_file: {{DIR}}/ca.pem}
tools:
  - name: transfers.create
    description: Create a transfer at a bank that requires a client certificate
    effect: write
    params_schema: {type: object, properties: {amount: {type: integer}}}
    http: {connection: bank, method: POST, url: /transfers, idempotency_header: Idempotency-Key}
  - name: transfers.create_nocert
    description: The same without a client certificate
    effect: write
    params_schema: {type: object, properties: {amount: {type: integer}}}
    http: {connection: bank-nocert, method: POST, url: /transfers, idempotency_header: Idempotency-Key}
    retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 20ms}
`

// TestMTLSConnection: a connection with a private CA and a client certificate reaches a server
// that requires one; without the certificate the handshake fails and nothing is sent.
func TestMTLSConnection(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ca := newTestCA(t)
		dir := t.TempDir()
		serverCert, serverKey := ca.issue(t, "bank.test", x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
		clientCert, clientKey := ca.issue(t, "idemgate-gateway", x509.ExtKeyUsageClientAuth)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.pem"), ca.pem, 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "client.pem"), clientCert, 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "client-key.pem"), clientKey, 0o600))

		var mu sync.Mutex
		var peers []string
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			peers = append(peers, r.TLS.PeerCertificates[0].Subject.CommonName)
			mu.Unlock()
			writeJSON(w, http.StatusCreated, map[string]string{"id": "T-1"})
		}))
		pair, err := tls.X509KeyPair(serverCert, serverKey)
		require.NoError(t, err)
		pool := x509.NewCertPool()
		pool.AddCert(ca.cert)
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
		srv.StartTLS()
		t.Cleanup(srv.Close)

		tools := strings.NewReplacer("{{DOWN}}", srv.URL, "{{DIR}}", dir).Replace(mtlsTools)
		g := startWithTools(t, d, tools, srv.URL, gatewaytest.Options{})
		op := requireOp(t, g.Submit(t, "transfer-1", "transfers.create", `{"amount":10}`, nil), http.StatusCreated)
		require.Equal(t, "SUCCEEDED", op["state"], "%v", op["error"])
		mu.Lock()
		assert.Equal(t, []string{"idemgate-gateway"}, peers, "the server saw the gateway's client certificate")
		mu.Unlock()

		// Under TLS 1.3 the server refuses the missing certificate only after the client has
		// written its request, so the gateway cannot prove nothing was sent: the attempt is
		// ambiguous (UNKNOWN, for reconciliation) rather than a failure. Either way it is not
		// taken for a success, and no request reached the server's handler.
		id := g.Submit(t, "transfer-2", "transfers.create_nocert", `{"amount":10}`, nil).JSON(t)["id"].(string)
		var nocert map[string]any
		gatewaytest.Eventually(t, 10*time.Second, "the attempt without a certificate to end", func() bool {
			nocert = getOp(t, g, g.Key, id).JSON(t)
			return nocert["state"] == "UNKNOWN" || nocert["state"] == "FAILED_FINAL"
		})
		assert.Contains(t, errorMember(t, nocert)["message"], "certificate")
		mu.Lock()
		assert.Len(t, peers, 1, "nothing reached the handler without a certificate")
		mu.Unlock()
	})
}
