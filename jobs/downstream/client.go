package downstream

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/idemgate/idemgate/jobs/catalog"
)

// SessionClient is an HTTP client for a long-lived session with one server (an MCP server over
// Streamable HTTP), which sends requests of its own (its stream, its notifications) that are
// not the executor's calls. Every request carries conn's credentials, read when it is sent (a
// rotated {file: …} secret applies at once); {tenant: …} secrets are not available, since one
// session serves every tenant. Used reports the credential values the last request carried,
// for the scrubber.
type SessionClient struct {
	*http.Client
	mu   sync.Mutex
	used []string
}

// Used returns the credential values of the latest request.
func (s *SessionClient) Used() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.used...)
}

// SessionClient returns a client presenting conn's credentials (nil conn: none). Redirects
// are not followed, as for every downstream request.
func (cn *Connector) SessionClient(conn *catalog.Connection) (*SessionClient, error) {
	base, err := cn.clientFor(conn)
	if err != nil {
		return nil, err
	}
	sc := &SessionClient{}
	sc.Client = newClient(&credentialed{cn: cn, conn: conn, base: base, note: func(v []string) {
		sc.mu.Lock()
		sc.used = v
		sc.mu.Unlock()
	}})
	return sc, nil
}

// credentialed is a RoundTripper that adds a connection's credentials to each request.
type credentialed struct {
	cn   *Connector
	conn *catalog.Connection
	base *http.Client // its transport sends; its client fetches OAuth2 tokens
	note func([]string)
}

func (c *credentialed) RoundTrip(req *http.Request) (*http.Response, error) {
	creds := c.cn.credentials(Call{Connection: c.conn})
	if err := creds.resolve(req.Context(), c.base); err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	c.note(creds.values)
	out := req.Clone(req.Context())
	creds.apply(out.Header)
	return c.base.Transport.RoundTrip(out)
}
