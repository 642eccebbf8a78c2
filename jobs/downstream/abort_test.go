package downstream_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemgate/idemgate/jobs/downstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bigBody is larger than every socket buffer between the two ends on loopback (send buffer
// plus receive buffer, autotuned to a few MiB at most): a request this large cannot have
// left the client's host whole when its timeout ends while the downstream reads nothing.
const bigBody = 32 << 20

// TestTimedOutRequestIsResetNotClosed: a downstream that accepts the connection and reads
// nothing until the attempt has timed out. The attempt must end with the connection reset:
// when the downstream then reads, it gets what was already in its socket buffer and then
// ECONNRESET, never the rest of the request. (With a plain close the kernel kept sending the
// unacknowledged request from the orphaned socket, and the downstream read all of it, long
// after the gateway had given up on it: issue 48.) A new request never reuses the
// connection.
func TestTimedOutRequestIsResetNotClosed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()

	payload := `{"note":"` + strings.Repeat("x", bigBody) + `"}`
	call := downstream.Call{Method: http.MethodPost, URL: "http://" + ln.Addr().String() + "/refunds",
		Body: []byte(payload), Header: http.Header{}, Timeout: 300 * time.Millisecond}
	cn := downstream.NewConnector()
	before := time.Now()
	r := cn.Do(context.Background(), call)
	require.Error(t, r.Err)
	assert.ErrorIs(t, r.Err, context.DeadlineExceeded)
	assert.True(t, r.Wrote, "the headers left before the timeout")
	require.False(t, r.AbortedAt.IsZero(), "the connection was reset, and the response says when")
	assert.False(t, r.AbortedAt.Before(before))

	var srv net.Conn
	select {
	case srv = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the downstream never saw the connection")
	}
	defer srv.Close()
	// Now the downstream reads: whatever had arrived, then the reset. Bounded generously so
	// a loaded machine cannot fail the test; a plain close would deliver the whole request
	// (and EOF) well within it.
	require.NoError(t, srv.SetReadDeadline(time.Now().Add(30*time.Second)))
	n, err := io.Copy(io.Discard, srv)
	require.Error(t, err, "the downstream must see the reset, not the end of a complete request")
	assert.True(t, errors.Is(err, syscall.ECONNRESET), "ECONNRESET, got %v", err)
	assert.Less(t, n, int64(len(payload)), "no more of the request arrived after the reset")
	// Nothing more arrives on that connection.
	m, _ := srv.Read(make([]byte, 1))
	assert.Zero(t, m)

	// The next request gets a new connection: the one the attempt timed out on is gone.
	go func() {
		c := <-accepted
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err == nil {
			_, _ = io.Copy(io.Discard, req.Body)
			_, _ = io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}")
		}
	}()
	call.Body, call.Timeout = []byte(`{}`), 10*time.Second
	r = cn.Do(context.Background(), call)
	require.NoError(t, r.Err)
	assert.Equal(t, http.StatusCreated, r.Status)
	assert.True(t, r.AbortedAt.IsZero(), "an answer read to its end aborts nothing")
}

// TestAnsweredConnectionIsReused: a request whose answer was read to the end leaves its
// connection to the pool, closed normally later; the guard does not cost a connection per
// request.
func TestAnsweredConnectionIsReused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	conns := make(chan int, 4)
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- i
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}")
				}
			}()
		}
	}()
	cn := downstream.NewConnector()
	call := downstream.Call{Method: http.MethodPost, URL: "http://" + ln.Addr().String() + "/t",
		Body: []byte(`{}`), Header: http.Header{}, Timeout: 10 * time.Second}
	for range 3 {
		r := cn.Do(context.Background(), call)
		require.NoError(t, r.Err)
		require.Equal(t, http.StatusOK, r.Status)
		assert.True(t, r.AbortedAt.IsZero())
	}
	assert.Len(t, conns, 1, "one connection served the three requests")
}

// TestUnreachableHostIsHeld: connection attempts to a host that refuses them are counted; after a
// few in a row the connector sends nothing more for a while and says until when
// (Response.RetryAfter), and the call counts as not sent.
func TestUnreachableHostIsHeld(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cn := downstream.NewConnector()
	call := downstream.Call{Method: http.MethodPost, URL: "http://" + addr + "/refunds", Body: []byte(`{}`),
		Header: http.Header{}, Timeout: 10 * time.Second}
	var down *downstream.HostDownError
	var r downstream.Response
	for range 20 {
		if r = cn.Do(context.Background(), call); errors.As(r.Err, &down) {
			break
		}
		assert.False(t, r.Wrote)
	}
	require.ErrorAs(t, r.Err, &down, "%v", r.Err)
	assert.False(t, r.Wrote)
	assert.Positive(t, r.RetryAfter, "held until the circuit lets a connection attempt through again")
	assert.Equal(t, addr, down.Host)
}
