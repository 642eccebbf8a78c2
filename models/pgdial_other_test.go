//go:build !linux

package models

import (
	"net"
	"testing"
)

func checkDeadPeerOptions(*testing.T, *net.TCPConn) {}
