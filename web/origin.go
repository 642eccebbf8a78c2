package web

import (
	"fmt"
	"net/http"
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

// sameOrigin refuses, with 403, a request whose Origin header names another site than the
// gateway itself or one of allowed. The MCP transport requires it (2025-11-25, "Security
// Warning"): a page on another site must not reach a server by its address (DNS rebinding).
// A request without Origin (any non-browser client) passes. The gateway's own origin is the
// request's: its Host and scheme, or what a trusted proxy says they were (X-Forwarded-Host,
// X-Forwarded-Proto), so a gateway behind a reverse proxy keeps working.
func sameOrigin(proxies TrustedProxies, allowed AllowedOrigins) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			got := r.Header.Get("Origin")
			if got == "" {
				return next(c)
			}
			o, ok := origin(got)
			if ok && (o == ownOrigin(r, proxies) || slices.Contains(allowed, o)) {
				return next(c)
			}
			return &handlers.Problem{Slug: problems.OriginNotAllowed,
				Detail: fmt.Sprintf("requests from pages of %q are not accepted; a browser client must be served from this gateway's origin or one it allows", got)}
		}
	}
}

// ownOrigin is the origin the client reached the gateway at.
func ownOrigin(r *http.Request, proxies TrustedProxies) string {
	scheme := "http"
	if proxies.overHTTPS(r) {
		scheme = "https"
	}
	host := r.Host
	if proxies.fromProxy(r) {
		if fwd := r.Header.Values("X-Forwarded-Host"); len(fwd) > 0 {
			list := strings.Split(fwd[len(fwd)-1], ",")
			host = strings.TrimSpace(list[len(list)-1])
		}
	}
	o, _ := origin(scheme + "://" + host)
	return o
}
