package downstream

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// An attempt is over only when its request can no longer arrive (docs/STATES.md, "When an
// attempt is over"). Go's transport closes a connection whose request timed out or was
// cancelled, and close(2) on a socket with unacknowledged data sends a FIN behind that data:
// the kernel keeps retransmitting the request from the orphaned socket for many minutes, and
// it can reach the downstream, and commit, long after the reconciler believed a "not found".
// So every downstream connection is a guardedConn: closed while a request holds it (before
// its answer was read to the end), it is reset instead (SO_LINGER 0: the kernel drops what it
// has not sent and answers the peer's next segment with a RST, and the peer's unread data is
// discarded), and the time of that reset is the attempt's abort. Unacknowledged data is
// bounded by TCP_USER_TIMEOUT, set to the call's timeout while a request holds the
// connection, so a socket orphaned by a killed process also gives up within the timeout.
// A connection is never reused after an aborted request: it is closed.

// defaultUserTimeout is TCP_USER_TIMEOUT on a new connection, before a request sets its own
// (the call's timeout): it bounds the TLS handshake's unacknowledged data, too.
const defaultUserTimeout = 30 * time.Second

// guardedConn is a downstream connection that is reset, not closed, when it is closed while
// a request holds it.
type guardedConn struct {
	net.Conn
	holder    atomic.Pointer[Attempt]
	closeOnce sync.Once
	closeErr  error
	abortedBy *Attempt // set under closeOnce
	abortedAt time.Time
}

// Close resets the connection when a request holds it, and closes it otherwise.
func (g *guardedConn) Close() error {
	g.closeOnce.Do(func() {
		if h := g.holder.Load(); h != nil {
			if tc, ok := g.Conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			g.abortedBy, g.abortedAt = h, time.Now()
		}
		g.closeErr = g.Conn.Close()
	})
	return g.closeErr
}

// hold marks the connection as carrying a's request, and bounds its unacknowledged data by
// a's timeout.
func (g *guardedConn) hold(a *Attempt) {
	g.holder.Store(a)
	if a.timeout > 0 {
		setUserTimeout(g.Conn, a.timeout)
	}
}

// Attempt collects the connections one request (or one MCP call, with the requests it
// makes) holds, so that they can be aborted when it ends without its answer. Put it in the
// request's context with WithAttempt.
type Attempt struct {
	timeout time.Duration
	// deadline is when the call gives up (zero: none known): a connection attempt made for it
	// ends then too (hostgate.go), since Go's transport lets dials outlive their requests.
	deadline time.Time
	mu       sync.Mutex
	conns    []*guardedConn
}

type attemptKey struct{}

// WithAttempt returns ctx carrying a new Attempt whose requests bound their unacknowledged
// data by timeout (TCP_USER_TIMEOUT; zero keeps the connection's). The requests sent with the
// returned context register the connections they use; Abort resets those still held.
func WithAttempt(ctx context.Context, timeout time.Duration) (context.Context, *Attempt) {
	a := &Attempt{timeout: timeout}
	if d, ok := ctx.Deadline(); ok {
		a.deadline = d
	} else if timeout > 0 {
		a.deadline = time.Now().Add(timeout)
	}
	return context.WithValue(ctx, attemptKey{}, a), a
}

func attemptFrom(ctx context.Context) *Attempt {
	a, _ := ctx.Value(attemptKey{}).(*Attempt)
	return a
}

func (a *Attempt) add(g *guardedConn) {
	g.hold(a)
	a.mu.Lock()
	a.conns = append(a.conns, g)
	a.mu.Unlock()
}

// release ends a's hold on its connections: their answers were read to the end, so nothing
// of a's requests is left to deliver and the transport may reuse them.
func (a *Attempt) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, g := range a.conns {
		g.holder.CompareAndSwap(a, nil)
	}
}

// Abort resets every connection a still holds (a request whose answer was not read to the
// end) and returns the latest moment one of a's connections was reset, by Abort or earlier by
// the transport closing it; zero when none was. From that moment on no byte of a's requests
// leaves this host: only what was already in the network may still arrive.
func (a *Attempt) Abort() time.Time {
	a.mu.Lock()
	conns := a.conns
	a.mu.Unlock()
	var at time.Time
	for _, g := range conns {
		if g.holder.Load() == a {
			_ = g.Close()
		}
		g.closeOnce.Do(func() {}) // wait for a Close in progress elsewhere
		if g.abortedBy == a && g.abortedAt.After(at) {
			at = g.abortedAt
		}
	}
	return at
}

// guarded is the RoundTripper in front of every downstream transport: it registers the
// connection each request gets with the request's Attempt (a fresh one when the context has
// none), releases it once the answer was read to the end, and aborts it when the round trip
// fails.
type guarded struct{ base http.RoundTripper }

func (t guarded) RoundTrip(req *http.Request) (*http.Response, error) {
	a := attemptFrom(req.Context())
	if a == nil {
		_, a = WithAttempt(req.Context(), 0)
	}
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if g := guardOf(info.Conn); g != nil {
			a.add(g)
		}
	}}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		a.Abort()
		return nil, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, a: a}
	return resp, nil
}

// guardOf finds the guardedConn under c (a TLS connection wraps it).
func guardOf(c net.Conn) *guardedConn {
	for range 4 {
		switch x := c.(type) {
		case *guardedConn:
			return x
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// releasingBody releases its attempt's connections once the answer was read to its end.
type releasingBody struct {
	io.ReadCloser
	a *Attempt
}

func (b *releasingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.a.release()
	}
	return n, err
}

// dialer dials downstream connections through each host's gate (hostgate.go): guarded, with
// keepalives and a default TCP_USER_TIMEOUT.
func dialer(gates *hostGates, dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := gates.dial(ctx, network, addr, dial)
		if err != nil {
			return nil, err
		}
		setUserTimeout(c, defaultUserTimeout)
		return &guardedConn{Conn: c}, nil
	}
}
