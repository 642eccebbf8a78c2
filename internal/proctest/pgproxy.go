package proctest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// CommitCutter is a TCP proxy in front of a PostgreSQL server that can cut a connection at
// the worst moment of a failover: after it forwarded a transaction's COMMIT and the server
// answered it, before the answer reaches the client. The transaction is then durable, and the
// client only knows that its connection broke. It reads the protocol's messages (version 3,
// no TLS: sslmode=disable) to tell which COMMIT ends a transaction that wrote what the test
// names.
type CommitCutter struct {
	Port int

	upstream string
	ln       net.Listener

	mu    sync.Mutex
	armed string // the SQL text whose transaction's COMMIT is cut next; "" when disarmed
	cuts  int
	cut   chan struct{}
}

// NewCommitCutter starts a proxy on a free loopback port to the server at host:port, closed
// when the test ends.
func NewCommitCutter(t testing.TB, host string, port int) (*CommitCutter, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &CommitCutter{Port: ln.Addr().(*net.TCPAddr).Port, upstream: net.JoinHostPort(host, strconv.Itoa(port)), ln: ln,
		cut: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			go c.serve(client)
		}
	}()
	return c, nil
}

// DSN is dsn with its host and port replaced by the proxy's.
func (c *CommitCutter) DSN(dsn string) string {
	host, port := HostPort(dsn)
	return strings.Replace(dsn, net.JoinHostPort(host, strconv.Itoa(port)), "127.0.0.1:"+strconv.Itoa(c.Port), 1)
}

// CutNextCommitOf arms the proxy: the next commit of a transaction that sent a statement
// containing sql (as a simple query, or parsed for the extended protocol) is forwarded, its
// answer swallowed, and the connection closed on both sides. The commit is a COMMIT, or, for
// a statement sent outside BEGIN … COMMIT, the Sync that ends its implicit transaction.
func (c *CommitCutter) CutNextCommitOf(sql string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = sql
}

// Cut is closed once a COMMIT has been cut.
func (c *CommitCutter) Cut() <-chan struct{} { return c.cut }

// Cuts is how many COMMITs were cut.
func (c *CommitCutter) Cuts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cuts
}

func (c *CommitCutter) armedFor() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.armed
}

// take disarms the proxy for the COMMIT about to be cut; false if another connection took it.
func (c *CommitCutter) take() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed == "" {
		return false
	}
	c.armed = ""
	return true
}

func (c *CommitCutter) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cuts++
	if c.cuts == 1 {
		close(c.cut)
	}
}

// serve relays one client connection. Client to server, message by message: the untyped
// startup message, then typed ones (a byte, a length that counts itself, a body). Server to
// client the same, except after a cut COMMIT, when everything up to ReadyForQuery is
// swallowed and both connections closed.
func (c *CommitCutter) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", c.upstream)
	if err != nil {
		return
	}
	defer server.Close()
	cutting := make(chan struct{}) // closed when the COMMIT to cut has been forwarded
	answered := make(chan struct{})
	go func() {
		defer client.Close()
		c.relayServer(server, client, cutting, answered)
	}()
	if err := copyStartup(client, server); err != nil {
		return
	}
	var (
		wrote   bool            // this transaction sent the armed statement
		written map[string]bool // prepared statements whose text holds it
		inTx    bool            // within BEGIN … COMMIT
	)
	written = map[string]bool{}
	for {
		typ, msg, err := readMessage(client)
		if err != nil {
			return
		}
		armed := c.armedFor()
		switch typ {
		case 'Q':
			q := strings.ToLower(strings.TrimSpace(strings.TrimRight(string(msg[5:]), "\x00")))
			switch {
			case armed != "" && strings.Contains(string(msg), armed):
				wrote = true
			case strings.HasPrefix(q, "begin") || q == "rollback":
				wrote, inTx = false, strings.HasPrefix(q, "begin")
			case q == "commit" && wrote && c.take():
				c.cutAfter(server, msg, cutting, answered)
				return // closes both connections: the client never hears the answer
			case q == "commit":
				inTx = false
			}
		case 'S': // Sync: outside a transaction, the statements before it commit
			if !inTx && wrote && c.take() {
				c.cutAfter(server, msg, cutting, answered)
				return
			}
			if !inTx {
				wrote = false
			}
		case 'P': // Parse: statement name, then its text
			name, rest, _ := bytes.Cut(msg[5:], []byte{0})
			if armed != "" && bytes.Contains(rest, []byte(armed)) {
				written[string(name)] = true
			}
		case 'B': // Bind: portal name, then the statement's name
			_, rest, _ := bytes.Cut(msg[5:], []byte{0})
			stmt, _, _ := bytes.Cut(rest, []byte{0})
			if written[string(stmt)] {
				wrote = true
			}
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// cutAfter forwards msg, the commit, and waits until its answer has been swallowed.
func (c *CommitCutter) cutAfter(server net.Conn, msg []byte, cutting chan<- struct{}, answered <-chan struct{}) {
	if _, err := server.Write(msg); err != nil {
		return
	}
	close(cutting)
	<-answered
	c.done()
}

// relayServer copies the server's messages to the client until the COMMIT to cut was
// forwarded; then it swallows them up to ReadyForQuery (the COMMIT answered) and says so.
func (c *CommitCutter) relayServer(server, client net.Conn, cutting <-chan struct{}, answered chan<- struct{}) {
	for {
		typ, msg, err := readMessage(server)
		if err != nil {
			return
		}
		select {
		case <-cutting:
			if typ == 'Z' {
				close(answered)
				return
			}
			continue
		default:
		}
		if _, err := client.Write(msg); err != nil {
			return
		}
	}
}

// copyStartup forwards the client's untyped startup message.
func copyStartup(client, server net.Conn) error {
	var head [8]byte
	if _, err := io.ReadFull(client, head[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(head[:4])
	if code := binary.BigEndian.Uint32(head[4:]); code == 80877103 || code == 80877104 {
		return fmt.Errorf("proctest: the cutter speaks no TLS or GSSAPI: use sslmode=disable")
	}
	if n < 8 || n > 1<<20 {
		return fmt.Errorf("proctest: startup message of %d bytes", n)
	}
	body := make([]byte, n-8)
	if _, err := io.ReadFull(client, body); err != nil {
		return err
	}
	_, err := server.Write(append(head[:], body...))
	return err
}

// readMessage reads one typed message and returns its type and the whole message.
func readMessage(r io.Reader) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > 1<<30 {
		return 0, nil, fmt.Errorf("proctest: message of %d bytes", n)
	}
	msg := make([]byte, 1+n)
	copy(msg, head[:])
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return 0, nil, err
	}
	return head[0], msg, nil
}
