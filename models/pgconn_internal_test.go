package models

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSeveralHostsMeanTheWritableOne(t *testing.T) {
	for _, c := range []struct {
		name, dsn string
		readWrite bool
	}{
		{"one host", "postgres://u@h1:5432/db", false},
		{"several hosts", "postgres://u@h1:5432,h2:5433/db", true},
		{"several hosts, read-write said", "postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write", true},
		{"several hosts, any said", "postgres://u@h1:5432,h2:5433/db?target_session_attrs=any", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := pgConfig(c.dsn, "", nil)
			require.NoError(t, err)
			assert.Equal(t, c.readWrite, cfg.ValidateConnect != nil)
			assert.Equal(t, PoolApplicationName, cfg.RuntimeParams["application_name"])
			assert.Equal(t, pgConnectTimeout, cfg.ConnectTimeout)
		})
	}
	cfg, err := pgConfig("postgres://u@h1/db?application_name=billing&connect_timeout=2", ListenerApplicationName, nil)
	require.NoError(t, err)
	assert.Equal(t, ListenerApplicationName, cfg.RuntimeParams["application_name"], "the listener names itself")
	cfg, err = pgConfig("postgres://u@h1/db?application_name=billing&connect_timeout=2", "", nil)
	require.NoError(t, err)
	assert.Equal(t, "billing", cfg.RuntimeParams["application_name"], "the URL's name is kept for the pool")
	assert.Equal(t, "2s", cfg.ConnectTimeout.String())
}

// The dialer every connection uses turns on keepalives (and, on Linux, TCP_USER_TIMEOUT), so a
// host that vanished is noticed within pgDeadPeer.
func TestDialerNoticesAVanishedPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			_, _ = c.Read(make([]byte, 1))
		}
	}()
	cfg, err := pgConfig("postgres://u@"+ln.Addr().String()+"/db", "", nil)
	require.NoError(t, err)
	conn, err := cfg.DialFunc(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	checkDeadPeerOptions(t, conn.(*net.TCPConn))
}
