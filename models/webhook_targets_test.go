package models_test

import (
	"net/netip"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
)

func TestForbiddenAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr      string
		forbidden bool
	}{
		{"8.8.8.8", false},
		{"93.184.216.34", false},
		{"2606:4700:4700::1111", false},
		{"64:ff9b::5db8:d822", false}, // NAT64 of a public address
		{"127.0.0.1", true},
		{"127.255.0.9", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true}, // IPv4-mapped loopback
		{"10.0.0.1", true},
		{"172.31.255.255", true},
		{"192.168.0.10", true},
		{"fd12:3456::1", true}, // unique-local
		{"169.254.169.254", true},
		{"fe80::1", true},
		{"0.0.0.0", true},
		{"::", true},
		{"0.1.2.3", true},
		{"100.64.0.1", true},
		{"198.18.0.1", true},
		{"224.0.0.251", true},
		{"ff02::1", true},
		{"255.255.255.255", true},
		{"64:ff9b::7f00:1", true}, // NAT64 of 127.0.0.1
		{"64:ff9b::a00:1", true},  // NAT64 of 10.0.0.1
	} {
		why := models.ForbiddenAddr(netip.MustParseAddr(tc.addr))
		assert.Equal(t, tc.forbidden, why != "", "%s: %q", tc.addr, why)
	}
}
