//go:build !linux

package downstream

import (
	"net"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not available; the reset on abort
// still applies.
func setUserTimeout(net.Conn, time.Duration) {}
