package models

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func checkDeadPeerOptions(t *testing.T, c *net.TCPConn) {
	t.Helper()
	raw, err := c.SyscallConn()
	require.NoError(t, err)
	var keepalive, idle, userTimeout int
	var serr error
	require.NoError(t, raw.Control(func(fd uintptr) {
		keepalive, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		if serr == nil {
			idle, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
		}
		if serr == nil {
			userTimeout, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		}
	}))
	require.NoError(t, serr)
	assert.Equal(t, 1, keepalive)
	assert.Equal(t, int((pgDeadPeer / 3).Seconds()), idle)
	assert.Equal(t, int(pgDeadPeer.Milliseconds()), userTimeout)
}
