package jobs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/idemgate/idemgate/models"
)

// guardedDialer connects only to public addresses. It resolves the host itself and dials the
// addresses it checked, so that a DNS answer cannot change between the check and the connection
// (DNS rebinding); any forbidden address among the answers refuses the whole host, as at
// subscription time.
type guardedDialer struct {
	resolver models.AddrResolver
	dialer   net.Dialer
}

// errPrivateTarget marks a refusal to connect to a non-public address.
var errPrivateTarget = errors.New("refused: private target")

// DialContext resolves, checks and dials addr.
func (g *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("webhook dial %s: %w", addr, err)
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else if addrs, err = g.resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, fmt.Errorf("webhook dial: resolve %s: %w", host, err)
	}
	for _, a := range addrs {
		if why := models.ForbiddenAddr(a); why != "" {
			return nil, fmt.Errorf("%w: %s resolves to %s, %s, and the subscription does not allow private targets", errPrivateTarget, host, a, why)
		}
	}
	var first error
	for _, a := range addrs {
		conn, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = fmt.Errorf("webhook dial: %s has no addresses", host)
	}
	return nil, first
}

// webhookClient returns the HTTP client of deliveries. Redirects are never followed (a
// receiver's Location could point anywhere, and is no proof of delivery), and no proxy is used:
// a proxy would connect on its own and bypass the address check. With a nil resolver the
// client checks nothing: it serves subscriptions that allow private targets.
func webhookClient(resolver models.AddrResolver, timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConnsPerHost = 16
	tr.IdleConnTimeout = 30 * time.Second
	if resolver != nil {
		g := &guardedDialer{resolver: resolver, dialer: net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}}
		tr.DialContext = g.DialContext
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
