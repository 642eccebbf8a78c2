package mcpclient

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// callMark travels on a tools/call's context to the HTTP transport of a Streamable HTTP
// server, which notes there what the SDK's error would not say: that the request never
// left (the server refused the connection), or that the answer passed the bound.
type callMark struct {
	notSent  atomic.Bool
	oversize atomic.Bool
}

type callMarkKey struct{}

func withMark(ctx context.Context, m *callMark) context.Context {
	return context.WithValue(ctx, callMarkKey{}, m)
}

// limitTransport bounds each answer's body: a tools/call's to the server's max_result_bytes
// (plus the JSON-RPC envelope), anything else (the listing) to MaxListingBytes.
type limitTransport struct {
	base http.RoundTripper
	max  int64
}

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	m, _ := req.Context().Value(callMarkKey{}).(*callMark)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		var op *net.OpError
		if m != nil && errors.As(err, &op) && op.Op == "dial" {
			m.notSent.Store(true) // no connection: nothing of the request was written
		}
		return nil, err
	}
	limit := int64(MaxListingBytes)
	if m != nil {
		limit = t.max
	}
	resp.Body = &limitedBody{rc: resp.Body, left: limit, mark: m}
	return resp, nil
}

// limitedBody fails a read past its bound, so the SDK stops reading (a JSON answer read whole,
// an event stream event by event) without the gateway holding what the server sent.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
	mark *callMark
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		if b.mark != nil {
			b.mark.oversize.Store(true)
		}
		return 0, errAnswerTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
