package web

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"
)

// TrustedProxies are the address ranges of the reverse proxies in front of the gateway
// (--trust-proxy). X-Forwarded-For and X-Forwarded-Proto are believed only from a peer within
// them: any other client could write those headers, to pass for another address (failed
// sign-ins are counted by address) or to ask for a Secure cookie over plain HTTP. Empty trusts
// no one: the connection's own address and scheme decide.
type TrustedProxies []netip.Prefix

// ParseTrustedProxies reads the value of --trust-proxy or IDEMGATE_TRUST_PROXY: address ranges
// in CIDR notation, or single addresses, separated by commas ("10.0.0.0/8,192.168.0.0/16",
// "127.0.0.1"). "" trusts no one. The old switch ("1", "true") named no proxy, and trusting
// every private address would let anyone on the network pose as a proxy: it is refused with a
// message saying what to write instead.
func ParseTrustedProxies(s string) (TrustedProxies, error) {
	var out TrustedProxies
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		switch strings.ToLower(part) {
		case "":
			continue
		case "1", "true", "yes", "on":
			return nil, errors.New("--trust-proxy (IDEMGATE_TRUST_PROXY) takes the address ranges of your proxies, not a switch: " +
				"write e.g. 127.0.0.1/32 for a proxy on this host, or 10.0.0.0/8,192.168.0.0/16")
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			addr, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return nil, fmt.Errorf("--trust-proxy: %q is neither an address range (10.0.0.0/8) nor an address", part)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// String lists the ranges as ParseTrustedProxies reads them.
func (p TrustedProxies) String() string {
	parts := make([]string, len(p))
	for i, r := range p {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// fromProxy reports whether r came straight from one of the proxies.
func (p TrustedProxies) fromProxy(r *http.Request) bool {
	if len(p) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return p.contains(addr.Unmap())
}

func (p TrustedProxies) contains(addr netip.Addr) bool {
	for _, r := range p {
		if r.Contains(addr) {
			return true
		}
	}
	return false
}

// overHTTPS reports whether the client reached the gateway over HTTPS: over TLS to this
// server, or through a proxy that says so. Of a list of schemes (each proxy on the way may add
// one), the last is the one the nearest proxy, the one trusted, wrote.
func (p TrustedProxies) overHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !p.fromProxy(r) {
		return false
	}
	proto := r.Header.Values("X-Forwarded-Proto")
	if len(proto) == 0 {
		return false
	}
	list := strings.Split(proto[len(proto)-1], ",")
	return strings.EqualFold(strings.TrimSpace(list[len(list)-1]), "https")
}

// ipExtractor is how the client's address is read: the connection's own, or, from a trusted
// proxy, the nearest address in X-Forwarded-For that is not one of the proxies. Echo's defaults
// (trusting every loopback, link-local and private address as a proxy) are switched off.
func (p TrustedProxies) ipExtractor() echo.IPExtractor {
	if len(p) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, r := range p {
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: net.IP(r.Addr().AsSlice()), Mask: net.CIDRMask(r.Bits(), r.Addr().BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}
