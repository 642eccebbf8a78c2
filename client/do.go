package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// submitRequest is the body of POST /v1/operations.
type submitRequest struct {
	Tool          string `json:"tool"`
	Params        any    `json:"params"`
	WorkflowRunID string `json:"workflow_run_id,omitempty"`
	StepID        string `json:"step_id,omitempty"`
}

// Do runs tool with params (anything that encodes as a JSON object) as the operation key
// names, and returns the operation once it is terminal.
//
// It sends the call with Prefer: wait, and polls the operation when the gateway answers before
// it is terminal. When a try fails in a way that leaves the outcome open (a transport error or
// lost answer, 409 in progress, 429, 500, 502, 503, 504), it sends the same request with the
// same key again after a backoff; the gateway runs a key at most once, so this is always safe,
// and Do never makes up a new key. Any other problem (422 key mismatch, 400 invalid params,
// 403, …) is returned at once as a *Problem.
//
// A SUCCEEDED operation is returned with a nil error; a FAILED_FINAL one with a *FailedError.
// When ctx ends first, Do returns what it knows with an error matching the operation's
// state's sentinel and ctx.Err(): call Do again with the same key, or Resume, to learn the
// outcome.
func (c *Client) Do(ctx context.Context, tool string, params any, key OperationKey) (*Operation, error) {
	body, err := json.Marshal(submitRequest{Tool: tool, Params: params, WorkflowRunID: key.WorkflowRunID, StepID: key.StepID})
	if err != nil {
		return nil, fmt.Errorf("client: encode the params of %s: %w", tool, err)
	}
	ans, err := c.exchange(ctx, "operation "+strconv.Quote(key.Key), func() (answer, error) {
		wait := c.waitWithin(ctx)
		h := http.Header{
			"Idempotency-Key": {headerValue(key.Key)},
			"Prefer":          {"wait=" + strconv.Itoa(int(wait/time.Second))},
			"Content-Type":    {"application/json"},
		}
		return c.send(ctx, http.MethodPost, "/v1/operations", h, body, wait+answerMargin)
	})
	if err != nil {
		return nil, err
	}
	return c.poll(ctx, ans.op, ans.retryAfter)
}

// Get returns the operation with the given id.
func (c *Client) Get(ctx context.Context, id string) (*Operation, error) {
	return c.read(ctx, "/v1/operations/"+url.PathEscape(id))
}

// Wait polls op until it is terminal or ctx ends, and returns it as Do does.
func (c *Client) Wait(ctx context.Context, op *Operation) (*Operation, error) {
	return c.poll(ctx, op, 0)
}

// poll reads op until it is terminal, at least hint apart.
func (c *Client) poll(ctx context.Context, op *Operation, hint time.Duration) (*Operation, error) {
	replayed := op.Replayed
	for try := 0; !op.State.Terminal(); try++ {
		if err := c.pause(ctx, c.backoff(try, hint)); err != nil {
			return op, op.outcome(err)
		}
		fresh, err := c.Get(ctx, op.ID)
		if err != nil {
			if ctx.Err() != nil {
				return op, op.outcome(ctx.Err())
			}
			return op, err
		}
		op = fresh
		op.Replayed = replayed
	}
	return op, op.outcome(nil)
}

// read GETs an operation, retrying failures that leave the answer open.
func (c *Client) read(ctx context.Context, path string) (*Operation, error) {
	ans, err := c.exchange(ctx, "GET "+path, func() (answer, error) {
		return c.send(ctx, http.MethodGet, path, nil, nil, answerMargin)
	})
	if err != nil {
		return nil, err
	}
	return ans.op, nil
}

// exchange sends a request until an answer settles it: an operation, or a problem that is
// final. Failures that leave the outcome open are retried with backoff (and count against
// the attempt limit); an operation still in progress is asked about again after its
// Retry-After (and does not count).
func (c *Client) exchange(ctx context.Context, what string, send func() (answer, error)) (answer, error) {
	var last error
	failures := 0
	for try := 0; ; try++ {
		ans, err := send()
		if ctx.Err() != nil {
			return answer{}, stopped(what, ctx.Err(), errors.Join(last, err))
		}
		var retryAfter time.Duration
		switch {
		case err != nil:
			last, failures = err, failures+1
		case ans.op != nil:
			return ans, nil
		case ans.problem.inFlight():
			last, retryAfter = ans.problem, ans.problem.RetryAfter
		case ans.problem.transient():
			last, retryAfter, failures = ans.problem, ans.problem.RetryAfter, failures+1
		default:
			return answer{}, ans.problem
		}
		if c.maxTries > 0 && failures >= c.maxTries {
			return answer{}, fmt.Errorf("client: %s: gave up after %d tries; the outcome is open, so ask again later "+
				"with the same key: %w", what, try+1, last)
		}
		if err := c.pause(ctx, c.backoff(try, retryAfter)); err != nil {
			return answer{}, stopped(what, err, last)
		}
	}
}

// stopped is the error of an exchange whose context ended before an answer settled it.
func stopped(what string, ctxErr, last error) error {
	return fmt.Errorf("client: %s: stopped before the outcome was known; ask again with the same key: %w",
		what, errors.Join(ctxErr, last))
}

// waitWithin is the Prefer: wait of the next submit: the client's wait, shortened so the
// gateway answers before ctx's deadline.
func (c *Client) waitWithin(ctx context.Context) time.Duration {
	wait := c.wait
	if deadline, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(deadline)-time.Second)
	}
	return max(wait, 0)
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
