package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
)

// Resume returns the operation the ledger holds under key: how an agent that restarted learns
// whether a step already took effect. It takes the call the agent is about to make (tool and
// params, as Do does) and checks that the operation recorded under key is that call: a key
// first used for another tool or other params answers an error matching ErrKeyMismatch, with
// the recorded operation, as POST /v1/operations answers 422 for it; that operation is not this
// step's, and sending the step under that key would be refused. A key never recorded is an
// error matching ErrNotFound; sending the step with that key is then safe.
//
// The gateway's fingerprint is keyed, so the comparison is of the params themselves, as
// decoded JSON (numbers by value, a member that is null on one side and absent on the other
// alike). A value the ledger masks as "***" (a sensitive param) matches any value; params the
// ledger no longer holds (dropped at the end of retention) match any params.
func (c *Client) Resume(ctx context.Context, tool string, params any, key OperationKey) (*Operation, error) {
	op, err := c.read(ctx, "/v1/operations?key="+url.QueryEscape(key.Key))
	if err != nil {
		return nil, err
	}
	given, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("idemgate: params: %w", err)
	}
	what := ""
	switch {
	case op.Tool != tool:
		what = fmt.Sprintf("tool %s, not %s", op.Tool, tool)
	case !sameParams(op.Params, given):
		what = "other params"
	}
	if what != "" {
		return op, &Problem{Type: "/problems/idempotency-key-mismatch", Slug: "idempotency-key-mismatch", Status: 422,
			Title:       "Idempotency key reused with different params",
			Detail:      fmt.Sprintf("the key %q was first used for %s: the recorded operation is not this call", key.Key, what),
			OperationID: op.ID, State: op.State}
	}
	return op, nil
}

// sameParams reports whether the recorded params (masked, or null once dropped) are the given
// ones.
func sameParams(recorded, given []byte) bool {
	if len(bytes.TrimSpace(recorded)) == 0 || bytes.Equal(bytes.TrimSpace(recorded), []byte("null")) {
		return true // dropped at the end of retention: nothing left to compare
	}
	r, errR := decodeJSON(recorded)
	g, errG := decodeJSON(given)
	if errR != nil || errG != nil {
		return false
	}
	return sameValue(r, g)
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	return v, dec.Decode(&v)
}

// masked is how the ledger shows a sensitive value.
const masked = "***"

func sameValue(recorded, given any) bool {
	if s, ok := recorded.(string); ok && s == masked {
		return true
	}
	switch r := recorded.(type) {
	case map[string]any:
		g, ok := given.(map[string]any)
		if !ok {
			return false
		}
		for k, rv := range r {
			if !sameValue(rv, g[k]) {
				return false
			}
		}
		for k, gv := range g {
			if _, ok := r[k]; !ok && gv != nil {
				return false
			}
		}
		return true
	case []any:
		g, ok := given.([]any)
		if !ok || len(g) != len(r) {
			return false
		}
		for i := range r {
			if !sameValue(r[i], g[i]) {
				return false
			}
		}
		return true
	case json.Number:
		g, ok := given.(json.Number)
		if !ok {
			return false
		}
		a, okA := new(big.Rat).SetString(r.String())
		b, okB := new(big.Rat).SetString(g.String())
		return okA && okB && a.Cmp(b) == 0
	}
	return recorded == given
}
