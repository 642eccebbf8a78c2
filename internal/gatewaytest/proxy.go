package gatewaytest

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// LossyProxy stands between an agent and a gateway and loses answers: the request reaches the
// gateway, which acts on it, and the agent's connection is then closed without the answer, as
// when a network or a load balancer drops it. It records the Idempotency-Key of every POST.
type LossyProxy struct {
	URL string

	mu    sync.Mutex
	drops int      // answers still to lose
	keys  []string // Idempotency-Key of each POST, in arrival order
}

// NewLossyProxy starts a proxy to target that loses the answers to the first drops POSTs, until
// the test ends.
func NewLossyProxy(t testing.TB, target string, drops int) *LossyProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("gatewaytest: proxy target: %v", err)
	}
	p := &LossyProxy{drops: drops}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !p.take(r.Header.Get("Idempotency-Key")) {
			rp.ServeHTTP(w, r)
			return
		}
		rp.ServeHTTP(httptest.NewRecorder(), r) // the gateway answers; the answer is lost
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic("gatewaytest: proxy cannot hijack: " + err.Error())
		}
		_ = conn.Close()
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// take records a POST's key and reports whether its answer is to be lost.
func (p *LossyProxy) take(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, key)
	if p.drops > 0 {
		p.drops--
		return true
	}
	return false
}

// Keys returns the Idempotency-Key of every POST the proxy saw, in order.
func (p *LossyProxy) Keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}
