//go:build !linux

package models

import (
	"syscall"
	"time"
)

// userTimeout does nothing where TCP_USER_TIMEOUT does not exist: keepalives alone notice a
// vanished host there, on idle connections.
func userTimeout(time.Duration) func(network, address string, c syscall.RawConn) error { return nil }
