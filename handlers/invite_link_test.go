package handlers

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The invite link is built on --public-url like every link idemgate gives out; without one, on
// the address the admin used, its scheme from the connection: X-Forwarded-Proto, which anyone
// in front may write, never decides it (issue 47, finding 11).
func TestInviteLink(t *testing.T) {
	r := httptest.NewRequest("POST", "http://console.internal:8080/admin/users", nil)
	r.Header.Set("X-Forwarded-Proto", "javascript")
	assert.Equal(t, "https://idemgate.example.com/invite/tok", inviteLink("https://idemgate.example.com", r, "tok"))
	assert.Equal(t, "http://console.internal:8080/invite/tok", inviteLink("", r, "tok"))
	r.TLS = &tls.ConnectionState{}
	assert.Equal(t, "https://console.internal:8080/invite/tok", inviteLink("", r, "tok"))
	assert.Equal(t, "https://idemgate.example.com/invite/a%2Fb", inviteLink("https://idemgate.example.com", r, "a/b"))
}
