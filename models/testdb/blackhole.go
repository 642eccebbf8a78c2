package testdb

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Blackhole is a TCP proxy in front of the test PostgreSQL that can stop forwarding without
// closing anything: the network between the gateway and its ledger going silent (a partition,
// a host that lost power), as seen from the gateway. Its connections stay open, so nothing
// but the gateway's own deadlines ends a wait on them.
type Blackhole struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	silent bool
	conns  []net.Conn
}

// NewBlackhole starts a proxy to the host of dsn (a postgres:// URL) and returns it with dsn
// rewritten to go through it. It stops when t ends.
func NewBlackhole(t testing.TB, dsn string) (*Blackhole, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("testdb: blackhole: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testdb: blackhole: %v", err)
	}
	b := &Blackhole{ln: ln, target: u.Host}
	b.cond = sync.NewCond(&b.mu)
	go b.accept()
	t.Cleanup(b.close)
	u.Host = ln.Addr().String()
	return b, u.String()
}

// Silence stops every byte both ways, on the open connections and on new ones (which are
// accepted and then hear nothing).
func (b *Blackhole) Silence() { b.set(true) }

// Heal forwards again.
func (b *Blackhole) Heal() { b.set(false) }

func (b *Blackhole) set(silent bool) {
	b.mu.Lock()
	b.silent = silent
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *Blackhole) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", b.target)
		if err != nil {
			c.Close()
			continue
		}
		b.mu.Lock()
		b.conns = append(b.conns, c, s)
		b.mu.Unlock()
		go b.pipe(c, s)
		go b.pipe(s, c)
	}
}

// pipe copies from src to dst, holding each chunk while the proxy is silent.
func (b *Blackhole) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			b.mu.Lock()
			for b.silent {
				b.cond.Wait()
			}
			b.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = dst.Close()
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

func (b *Blackhole) close() {
	b.ln.Close()
	b.Heal()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
}
