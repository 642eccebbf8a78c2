package web_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/idemgate/idemgate/internal/consoletest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/web"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// proxies parses --trust-proxy ranges for a test.
func proxies(t *testing.T, s string) web.TrustedProxies {
	t.Helper()
	p, err := web.ParseTrustedProxies(s)
	require.NoError(t, err)
	return p
}

func TestParseTrustedProxies(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"":                            nil,
		"10.0.0.0/8,192.168.0.0/16":   {"10.0.0.0/8", "192.168.0.0/16"},
		" 10.0.0.0/8 , fd00::/8 ,":    {"10.0.0.0/8", "fd00::/8"},
		"127.0.0.1":                   {"127.0.0.1/32"},
		"::1":                         {"::1/128"},
		"10.1.2.3/8":                  {"10.0.0.0/8"},
		"203.0.113.7,198.51.100.0/24": {"203.0.113.7/32", "198.51.100.0/24"},
	} {
		got, err := web.ParseTrustedProxies(in)
		require.NoError(t, err, in)
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		assert.Equal(t, want, s, in)
	}
	for _, in := range []string{"1", "true", "TRUE", "yes", "proxy.internal", "10.0.0.0/33", "10.0.0.0/8;192.168.0.0/16"} {
		_, err := web.ParseTrustedProxies(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), "--trust-proxy", in)
	}
	_, err := web.ParseTrustedProxies("1")
	assert.Contains(t, err.Error(), "127.0.0.1/32", "the old switch is told what to write instead")
}

// X-Forwarded-For is believed only from a trusted proxy: a client elsewhere cannot pass for
// another address (failed sign-ins are counted, and audited, by address).
func TestForwardedForOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	const spoofed = "203.0.113.9"
	for name, tc := range map[string]struct {
		proxies web.TrustedProxies
		actor   string
	}{
		"no proxy trusted":                      {nil, "anonymous:127.0.0.1"},
		"the peer is not one of the proxies":    {web.TrustedProxies{netip.MustParsePrefix("10.0.0.0/8")}, "anonymous:127.0.0.1"},
		"private peers are not proxies by rule": {web.TrustedProxies{netip.MustParsePrefix("192.168.0.0/16")}, "anonymous:127.0.0.1"},
		"the peer is a trusted proxy":           {web.TrustedProxies{netip.MustParsePrefix("127.0.0.0/8")}, "anonymous:" + spoofed},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			con := consoletest.Start(t, models.SQLite, consoletest.Options{TrustedProxies: tc.proxies})
			b := con.NewBrowser(t)
			b.Header.Set("X-Forwarded-For", spoofed)
			require.Equal(t, http.StatusUnauthorized, b.Login(t, "nobody@example.com", "a wrong password indeed").Status)
			entries, _, err := con.Ledger.AuditEntries(t.Context(), models.AllTenants(),
				models.AuditSearch{Action: models.AuditLoginFailed, Limit: 10})
			require.NoError(t, err)
			require.Len(t, entries, 1)
			assert.Equal(t, tc.actor, entries[0].Actor)
		})
	}
}
