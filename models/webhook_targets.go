package models

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// AddrResolver resolves host names to addresses; *net.Resolver implements it. Tests hand in
// their own to play a DNS answer that changes.
type AddrResolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ AddrResolver = (*net.Resolver)(nil)

// maxWebhookURL bounds a subscription's URL.
const maxWebhookURL = 2048

// resolveTimeout bounds the DNS look-up that checks a new subscription's target.
const resolveTimeout = 5 * time.Second

// reservedPrefixes are special-purpose ranges that the netip predicates do not cover and that
// no public receiver lives in.
var reservedPrefixes = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a 'this network' address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
}

// nat64Prefixes embed an IPv4 address in their last 32 bits: the embedded address decides.
var nat64Prefixes = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}

// ForbiddenAddr says why a webhook may not be sent to ip unless its subscription allows private
// targets ("a loopback address", …), or returns "" when ip is a public address. It covers
// loopback, private (RFC 1918), unique-local, link-local (cloud metadata services live there),
// unspecified, multicast and the other special-purpose ranges, IPv4-mapped and NAT64 forms
// included, so that a tenant cannot aim deliveries at services inside the network.
func ForbiddenAddr(ip netip.Addr) string {
	ip = ip.Unmap()
	for _, p := range nat64Prefixes {
		if p.Contains(ip) {
			b := ip.As16()
			return ForbiddenAddr(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		}
	}
	switch {
	case !ip.IsValid():
		return "not an address"
	case ip.IsUnspecified():
		return "an unspecified address"
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsPrivate():
		if ip.Is6() {
			return "a unique-local address"
		}
		return "a private address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local address"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "a multicast address"
	}
	for _, r := range reservedPrefixes {
		if r.prefix.Contains(ip) {
			return r.why
		}
	}
	return ""
}

// CheckWebhookURL parses raw as a webhook target: http or https, a host, no credentials. Unless
// allowPrivate, the host must resolve (through r; nil is the system resolver) and every address
// it resolves to must be public: one private answer among public ones is enough for DNS
// round-robin to send a delivery inside. The publisher checks again at send time, since DNS
// answers change.
func CheckWebhookURL(ctx context.Context, r AddrResolver, raw string, allowPrivate bool) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > maxWebhookURL {
		return nil, errorf(CodeInvalid, "the webhook URL must have 1 to %d characters", maxWebhookURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errorf(CodeInvalid, "the webhook URL %q is not a URL", raw)
	}
	if u.Scheme = strings.ToLower(u.Scheme); u.Scheme != "http" && u.Scheme != "https" {
		return nil, errorf(CodeInvalid, "the webhook URL must be http or https, not %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, errorf(CodeInvalid, "the webhook URL %q has no host", raw)
	}
	if u.User != nil {
		// Lists and the console show the URL; receivers authenticate deliveries by signature.
		return nil, errorf(CodeInvalid, "the webhook URL must not carry credentials; receivers verify the signature instead")
	}
	u.Fragment, u.RawFragment = "", ""
	if allowPrivate {
		return u, nil
	}
	addrs, err := resolveHost(ctx, r, u.Hostname())
	if err != nil {
		return nil, &Error{Code: CodeInvalid, Message: fmt.Sprintf("the webhook host %q does not resolve", u.Hostname()), Err: err}
	}
	for _, a := range addrs {
		if why := ForbiddenAddr(a); why != "" {
			return nil, errorf(CodeInvalid, "the webhook host %q resolves to %s, %s; such targets need --allow-private", u.Hostname(), a, why)
		}
	}
	return u, nil
}

// resolveHost returns the addresses of host: itself when it is an address literal.
func resolveHost(ctx context.Context, r AddrResolver, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{ip}, nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, errorf(CodeInvalid, "no addresses")
	}
	return addrs, nil
}
