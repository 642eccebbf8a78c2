package downstream

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestUserTimeoutIsTheCallsTimeout: a downstream connection bounds unacknowledged data by
// defaultUserTimeout from its dial, and by the call's timeout once a request holds it, so a
// socket orphaned by a killed gateway gives up within the tool's timeout.
func TestUserTimeoutIsTheCallsTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	c, err := dialer(newHostGates(), nil)(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	g := c.(*guardedConn)
	read := func() int {
		raw, err := g.Conn.(*net.TCPConn).SyscallConn()
		require.NoError(t, err)
		var v int
		var serr error
		require.NoError(t, raw.Control(func(fd uintptr) {
			v, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		}))
		require.NoError(t, serr)
		return v
	}
	assert.Equal(t, int(defaultUserTimeout.Milliseconds()), read())
	_, a := WithAttempt(context.Background(), 1234*time.Millisecond)
	a.add(g)
	assert.Equal(t, 1234, read())
}
