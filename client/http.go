package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxAnswer bounds how much of an answer is read: operations carry params of at most 1 MiB
// and a downstream's result.
const maxAnswer = 16 << 20

// answer is what one request got back: an operation, or a problem.
type answer struct {
	op      *Operation
	problem *Problem
	// retryAfter is the answer's Retry-After (a 202 says when to look again).
	retryAfter time.Duration
}

// send makes one request and reads its answer. An error means the request may or may not have
// reached the gateway and no answer was read: the outcome is open.
func (c *Client) send(ctx context.Context, method, path string, header http.Header, body []byte, timeout time.Duration) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return answer{}, fmt.Errorf("client: build %s %s: %w", method, path, err)
	}
	for name, values := range header {
		req.Header[name] = values
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Accept", "application/json, application/problem+json")
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return answer{}, fmt.Errorf("client: %s %s: reading the answer: %w", method, path, err)
	}
	ans := answer{retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		var op Operation
		if err := json.Unmarshal(raw, &op); err != nil || op.ID == "" {
			// A 2xx whose body cannot be read may still mean the operation was recorded:
			// the outcome is open, so the request is sent again with the same key.
			return answer{}, fmt.Errorf("client: %s %s: unreadable %d answer: %v", method, path, resp.StatusCode, err)
		}
		op.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
		ans.op = &op
		return ans, nil
	}
	ans.problem = readProblem(resp, raw)
	ans.problem.RetryAfter = ans.retryAfter
	return ans, nil
}

// problemJSON is the wire form of a problem.
type problemJSON struct {
	Type                  string       `json:"type"`
	Title                 string       `json:"title"`
	Status                int          `json:"status"`
	Detail                string       `json:"detail"`
	OperationID           string       `json:"operation_id"`
	State                 State        `json:"state"`
	SafeToRetryWithNewKey *bool        `json:"safe_to_retry_with_new_key"`
	Errors                []ParamError `json:"errors"`
	Rule                  string       `json:"rule"`
	Reason                string       `json:"reason"`
}

// readProblem reads an error answer: problem details, or whatever a proxy in between sent.
func readProblem(resp *http.Response, raw []byte) *Problem {
	p := &Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode), Location: resp.Header.Get("Location")}
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var body problemJSON
	if (media == "application/problem+json" || media == "application/json") && json.Unmarshal(raw, &body) == nil && body.Type != "" {
		p.Type, p.Slug = body.Type, body.Type[strings.LastIndexByte(body.Type, '/')+1:]
		p.Title, p.Detail, p.OperationID, p.State, p.Errors = body.Title, body.Detail, body.OperationID, body.State, body.Errors
		p.SafeToRetryWithNewKey = body.SafeToRetryWithNewKey != nil && *body.SafeToRetryWithNewKey
		p.Rule, p.Reason = body.Rule, body.Reason
		return p
	}
	p.Detail = strings.TrimSpace(string(raw[:min(len(raw), 200)]))
	return p
}

// parseRetryAfter reads Retry-After: seconds or an HTTP date; zero when absent or malformed.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// inFlight reports whether p says the operation exists and is not terminal yet: the same
// request, sent again later, gets its outcome.
func (p *Problem) inFlight() bool {
	return p.Is(ErrOperationInProgress) || p.Is(ErrOperationUncertain) || p.Is(ErrOperationAwaitingApproval)
}

// transient reports whether p is a failure that leaves the outcome open and may pass:
// throttling, an unavailable ledger, a server or proxy error. The same request, with the same
// key, is safe to send again.
func (p *Problem) transient() bool {
	switch p.Status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}
