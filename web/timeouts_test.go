package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/handlers/headers"
	"github.com/idemgate/idemgate/web"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultTimeoutsLeaveRoomForTheLongestWait(t *testing.T) {
	t.Parallel()
	d := web.DefaultTimeouts
	srv := web.NewServer(http.NotFoundHandler(), d)
	for name, v := range map[string]time.Duration{"read header": srv.ReadHeaderTimeout, "read": srv.ReadTimeout,
		"write": srv.WriteTimeout, "idle": srv.IdleTimeout} {
		assert.Positive(t, v, name)
	}
	assert.Greater(t, srv.WriteTimeout, headers.MaxWait, "Prefer: wait=60 (and an MCP call's wait) is answered before the write timeout")
	assert.Less(t, srv.ReadTimeout, srv.WriteTimeout)
}

// serveWith runs h behind NewServer with timeouts t until the test ends, and returns its address.
func serveWith(t *testing.T, h http.Handler, to web.Timeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- web.Serve(ctx, web.NewServer(h, to), ln, time.Second) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// A client that sends its headers and then holds the body back is cut off at the read timeout,
// instead of holding a connection and a handler for ever.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	readErr := make(chan error, 1)
	addr := serveWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
	}), web.Timeouts{ReadHeader: time.Second, Read: 200 * time.Millisecond, Write: time.Second, Idle: time.Second})
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprint(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly a few bytes")
	require.NoError(t, err)
	select {
	case err := <-readErr:
		require.Error(t, err, "the handler's read of the body fails")
	case <-time.After(30 * time.Second):
		t.Fatal("the body was never cut off")
	}
}

// An answer that streams for longer than the write timeout (an export download) is cut off,
// unless it writes through handlers.KeepWriting, which moves the deadline as it makes progress.
func TestKeepWritingOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	const parts = 5
	stream := func(keep bool) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var out io.Writer = w
			if keep {
				out = handlers.KeepWriting(w, 5*time.Second)
			}
			for i := range parts {
				if _, err := fmt.Fprintf(out, "part %d\n", i); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				time.Sleep(100 * time.Millisecond) // a slow producer: the whole stream outlasts the write timeout
			}
		})
	}
	to := web.Timeouts{ReadHeader: time.Second, Read: time.Second, Write: 250 * time.Millisecond, Idle: time.Second}
	lines := func(addr string) int {
		resp, err := http.Get("http://" + addr + "/")
		require.NoError(t, err)
		defer resp.Body.Close()
		n := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "part ") {
				n++
			}
		}
		return n
	}
	assert.Less(t, lines(serveWith(t, stream(false), to)), parts, "without it, the stream is cut at the write timeout")
	assert.Equal(t, parts, lines(serveWith(t, stream(true), to)), "with it, the whole stream arrives")
}
