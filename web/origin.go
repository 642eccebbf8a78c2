package web

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/labstack/echo/v4"
)

// AllowedOrigins are the origins, besides the gateway's own, whose pages may call /mcp from a
// browser (--allowed-origin, IDEMGATE_ALLOWED_ORIGINS): scheme://host[:port], as a browser
// sends them in Origin.
type AllowedOrigins []string

// ParseAllowedOrigins reads a comma-separated list of origins; "" is none.
func ParseAllowedOrigins(s string) (AllowedOrigins, error) {
	var out AllowedOrigins
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		o, ok := origin(part)
		if !ok {
			return nil, fmt.Errorf("allowed origin %q: write it as scheme://host[:port], as a browser sends it in Origin", part)
		}
		out = append(out, o)
	}
	return out, nil
}

// origin reads s as an origin, lower-cased, without a default port; ok is false for anything
// else (a path, a query, "null").
func origin(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	host := strings.ToLower(u.Host)
	host = strings.TrimSuffix(host, map[string]string{"http": ":80", "https": ":443"}[u.Scheme])
	return u.Scheme + "://" + host, true
}

// sameOrigin refuses, with 403, a request whose Origin header names a site that is not one of
// the gateway's own. The MCP transport requires it (2025-11-25, "Security Warning"): a page on
// another site must not reach a server by its address (DNS rebinding). A request without
// Origin (any non-browser client) passes.
//
// A rebinding page's request carries its own site as both Host and Origin, so the two agreeing
// proves nothing; the gateway's own origins are what it was told, not what a request claims:
//   - from a trusted proxy, the origin the proxy was reached at (X-Forwarded-Proto and
//     X-Forwarded-Host): the proxy routes only the names it serves;
//   - the origins given with --allowed-origin (the gateway's public URL among them);
//   - on loopback, a loopback origin reaching a loopback Host (localhost, 127.0.0.1, [::1]).
func sameOrigin(proxies TrustedProxies, allowed AllowedOrigins) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			got := r.Header.Get("Origin")
			if got == "" {
				return next(c)
			}
			o, ok := origin(got)
			if ok && (slices.Contains(allowed, o) || ownOrigin(r, proxies, o)) {
				return next(c)
			}
			return &handlers.Problem{Slug: problems.OriginNotAllowed,
				Detail: fmt.Sprintf("requests from pages of %q are not accepted; a browser client must be served from this gateway's origin or one it allows", got)}
		}
	}
}

// ownOrigin reports whether o is the origin the client reached the gateway at, where that can
// be trusted: through a trusted proxy, or on loopback.
func ownOrigin(r *http.Request, proxies TrustedProxies, o string) bool {
	scheme := "http"
	if proxies.overHTTPS(r) {
		scheme = "https"
	}
	if proxies.fromProxy(r) {
		host := r.Host
		if fwd := r.Header.Values("X-Forwarded-Host"); len(fwd) > 0 {
			list := strings.Split(fwd[len(fwd)-1], ",")
			host = strings.TrimSpace(list[len(list)-1])
		}
		own, _ := origin(scheme + "://" + host)
		return o == own
	}
	u, err := url.Parse(o)
	return err == nil && loopbackName(u.Hostname()) && loopbackName(hostname(r.Host))
}

// loopbackName reports whether host names this machine's loopback interface.
func loopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback()
}

// hostname is the host of a Host header, without its port.
func hostname(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.Trim(h, "[]")
	}
	return strings.Trim(hostport, "[]")
}
