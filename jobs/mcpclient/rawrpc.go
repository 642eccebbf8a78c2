package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawCaller sends JSON-RPC requests of the pool's own on a session the SDK's client holds: the
// requests its client has no method for (tasks/get, tasks/result: the Go SDK has no tasks yet)
// and those whose answer it reads into types that drop members (a tool's execution). The
// answer is the result as sent, or the JSON-RPC error as a *jsonrpc.Error.
type rawCaller interface {
	call(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// rawIDPrefix begins the id of every request the pool sends itself; the SDK's own ids are
// numbers, so the two never meet.
const rawIDPrefix = "idemgate-"

var rawSeq atomic.Int64

func rawRequest(method string, params any) (*jsonrpc.Request, string, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, "", fmt.Errorf("%s: params: %w", method, err)
	}
	id := fmt.Sprintf("%s%d", rawIDPrefix, rawSeq.Add(1))
	jid, err := jsonrpc.MakeID(id)
	if err != nil {
		return nil, "", err
	}
	return &jsonrpc.Request{ID: jid, Method: method, Params: p}, id, nil
}

// answer is a response's result or error.
func answer(r *jsonrpc.Response) (json.RawMessage, error) {
	if r.Error != nil {
		return nil, r.Error
	}
	return r.Result, nil
}

// rawConn is a stdio session's connection with a side channel: the pool's requests are written
// on the same stream as the SDK's, and their answers are taken out before the SDK reads the
// next message. (A stdio connection carries no per-session state of the SDK's, so wrapping it
// hides nothing from the client.)
type rawConn struct {
	mcp.Connection

	mu      sync.Mutex
	pending map[string]chan *jsonrpc.Response
	ended   error // the connection failed or closed: no answer will come
}

func newRawConn(c mcp.Connection) *rawConn {
	return &rawConn{Connection: c, pending: map[string]chan *jsonrpc.Response{}}
}

// Read returns the next message that is not an answer to one of the pool's requests.
func (c *rawConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			c.end(err)
			return nil, err
		}
		r, ok := msg.(*jsonrpc.Response)
		if !ok {
			return msg, nil
		}
		id, ok := r.ID.Raw().(string)
		if !ok || !strings.HasPrefix(id, rawIDPrefix) {
			return msg, nil
		}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- r // buffered: the caller may have stopped waiting
		}
	}
}

func (c *rawConn) Close() error {
	c.end(errors.New("the session closed"))
	return c.Connection.Close()
}

// end fails every request still waiting.
func (c *rawConn) end(why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended == nil {
		c.ended = why
	}
	for id, ch := range c.pending {
		ch <- &jsonrpc.Response{Error: fmt.Errorf("the session ended: %w", why)}
		delete(c.pending, id)
	}
}

func (c *rawConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	req, id, err := rawRequest(method, params)
	if err != nil {
		return nil, err
	}
	ch := make(chan *jsonrpc.Response, 1)
	c.mu.Lock()
	if c.ended != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("the session ended: %w", c.ended)
	}
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.Connection.Write(ctx, req); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		return answer(r)
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// httpRaw sends the pool's requests to a Streamable HTTP server in the session the SDK's client
// opened: a POST of its own with the session's id and protocol version, its answer read from
// the JSON body or the event stream. The client is the session's, with its credentials and its
// bound on answers.
type httpRaw struct {
	client   *http.Client
	endpoint string
	session  string
	version  string
}

func (h *httpRaw) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	req, id, err := rawRequest(method, params)
	if err != nil {
		return nil, err
	}
	body, err := jsonrpc.EncodeMessage(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, h.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json, text/event-stream")
	if h.session != "" {
		hr.Header.Set("Mcp-Session-Id", h.session)
	}
	if h.version != "" {
		hr.Header.Set("Mcp-Protocol-Version", h.version)
		if h.version >= "2026-07-28" {
			hr.Header.Set("Mcp-Method", method)
		}
	}
	resp, err := h.client.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", method, resp.StatusCode)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct == "text/event-stream" {
		return readEvents(resp.Body, id, method)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the answer: %w", method, err)
	}
	return responseFor(data, id, method)
}

// readEvents reads an event stream until the message answering id.
func readEvents(r io.Reader, id, method string) (json.RawMessage, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxListingBytes)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				if res, err := responseFor(data, id, method); !errors.Is(err, errNotOurs) {
					return res, err
				}
			}
			data = data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: reading the stream: %w", method, err)
	}
	return nil, fmt.Errorf("%s: the stream ended without an answer", method)
}

var errNotOurs = errors.New("not the answer")

// responseFor decodes one JSON-RPC message, the answer to id.
func responseFor(data []byte, id, method string) (json.RawMessage, error) {
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, fmt.Errorf("%s: the answer is not JSON-RPC: %w", method, err)
	}
	r, ok := msg.(*jsonrpc.Response)
	if !ok || r.ID.Raw() != id {
		return nil, errNotOurs
	}
	return answer(r)
}
