package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/models/fingerprint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodeSeeds are bodies worth starting from: good ones, spellings of one value, and the
// tricky inputs a canonicaliser gets wrong (duplicates, escapes, inexact numbers, bad UTF-8).
var decodeSeeds = []string{
	`{"tool":"tickets.create","params":{"subject":"Printer on fire"}}`,
	` { "params" : { "subject" : "Printer on fire" } , "tool" : "tickets.create" } `,
	`{"tool":"tickets\u002ecreate","params":{"subject":"Printer on fire"}}`,
	`{"tool":"tickets__create","params":{"subject":"Printer on fire"}}`,
	`{"tool":"refunds.issue","params":{"order_id":"1042","amount_cents":10,"currency":"EUR"}}`,
	`{"tool":"refunds.issue","params":{"currency":"EUR","amount_cents":10.0,"order_id":"1042"}}`,
	`{"tool":"refunds.issue","params":{"order_id":"1042","amount_cents":1e1,"currency":"EUR"}}`,
	`{"tool":"refunds.issue","params":{"order_id":"1042","amount_cents":100e-1,"currency":"EUR"}}`,
	`{"tool":"refunds.issue","params":{"order_id":"1042","amount_cents":"10","currency":"EUR"}}`,
	`{"tool":"t","params":{"a":0}}`,
	`{"tool":"t","params":{"a":-0}}`,
	`{"tool":"t","params":{"a":0e999999999}}`,
	`{"tool":"t","params":{"a":0.1}}`,
	`{"tool":"t","params":{"a":1e-1}}`,
	`{"tool":"t","params":{"a":9007199254740992}}`,
	`{"tool":"t","params":{"a":9007199254740993}}`,
	`{"tool":"t","params":{"a":12345678901234567891}}`,
	`{"tool":"t","params":{"a":1e400}}`,
	`{"tool":"t","params":{"a":1,"a":2}}`,
	`{"tool":"t","params":{"a":1,"\u0061":2}}`,
	`{"tool":"t","tool":"u"}`,
	`{"tool":"t","params":{"a":"\u00e9"}}`,
	`{"tool":"t","params":{"a":"é"}}`,
	`{"tool":"t","params":{"a":"\ud800"}}`,
	"{\"tool\":\"t\",\"params\":{\"a\":\"\xff\"}}",
	"{\"tool\":\"t\xff\"}",
	"\xef\xbb\xbf{\"tool\":\"t\"}",
	`{"tool":"t"}`,
	`{"tool":"t","params":{}}`,
	`{"tool":"t","params":null}`,
	`{"tool":"t","params":[1,2]}`,
	`{"tool":"t","params":"x"}`,
	`{"tool":"t","params":1}`,
	`{"tool":"t","params":{"a":[1,2]}}`,
	`{"tool":"t","params":{"a":[2,1]}}`,
	`{"tool":"t","params":{"a":null}}`,
	`{"tool":"t","params":{"a":{"b":[1,{"c":true}]}}}`,
	`{"tool":"t","params":{"ab":1}}`,
	`{"tool":"t","params":{"a":1,"b":1}}`,
	`{"tool":"x\",\"params\":{}}","params":{}}`,
	`{"tool":"t","workflow_run_id":"w-1","step_id":"s-1"}`,
	`{"tool":"t","workflow_run_id":"` + strings.Repeat("w", 256) + `"}`,
	`{"tool":"t","extra":1}`,
	`{"tool":""}`,
	`{"tool":1}`,
	`{"tool":"t"} {"tool":"u"}`,
	`{"tool":"t"`,
	`{}`, `[]`, `null`, `""`, ``, `{"tool":null}`,
	`{"tool":"t","params":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70) + `}`,
}

// fuzzKey keys the fingerprints FuzzDecodeOperationRequest compares.
var fuzzKey, _ = fingerprint.NewKey([]byte("fuzz-key-fuzz-key-fuzz-key-32byt"))

// FuzzDecodeOperationRequest checks the request decoder never panics, that what it accepts is
// a usable request with canonical params, and that two accepted bodies share a fingerprint
// exactly when they name the same tool with the same params (numbers compared as exact
// rationals), so neither a replay nor a mismatch can be misjudged.
func FuzzDecodeOperationRequest(f *testing.F) {
	for i, s := range decodeSeeds {
		f.Add([]byte(s), []byte(decodeSeeds[(i+1)%len(decodeSeeds)]))
		f.Add([]byte(s), []byte(decodeSeeds[0]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ra, okA := checkDecode(t, a)
		rb, okB := checkDecode(t, b)
		if !okA || !okB {
			return
		}
		sa, sb := semanticsOf(t, a), semanticsOf(t, b)
		if !sa.exactMembers || !sb.exactMembers {
			return // see TestDecodeRejectsCaseVariantMembers
		}
		same := sa.tool == sb.tool && sameValue(t, sa.params, sb.params)
		fa, fb := fuzzKey.Of(ra.Tool, effectiveParams(ra)), fuzzKey.Of(rb.Tool, effectiveParams(rb))
		if (fa == fb) != same {
			t.Fatalf("bodies %q and %q: same tool and params: %v, same fingerprint: %v", a, b, same, fa == fb)
		}
	})
}

// checkDecode decodes body and checks the properties every answer must have. It reports
// whether the body was accepted.
func checkDecode(t *testing.T, body []byte) (operationRequest, bool) {
	t.Helper()
	req, err := decodeOperationRequest(bytes.NewReader(body))
	if err != nil {
		var p *Problem
		if !errors.As(err, &p) {
			t.Fatalf("body %q: error %v is not a *Problem", body, err)
		}
		if p.Slug != problems.MalformedBody && p.Slug != problems.BodyTooLarge {
			t.Fatalf("body %q: problem %s, want malformed-body or body-too-large", body, p.Slug)
		}
		return req, false
	}
	if req.Tool == "" || !utf8.ValidString(req.Tool) {
		t.Fatalf("body %q: accepted with tool %q", body, req.Tool)
	}
	if len(req.WorkflowRunID) > 255 || len(req.StepID) > 255 {
		t.Fatalf("body %q: accepted over-long workflow_run_id or step_id", body)
	}
	if s := semanticsOf(t, body); s.exactMembers {
		if s.tool != req.Tool {
			t.Fatalf("body %q: tool %q decoded as %q", body, s.tool, req.Tool)
		}
		if !sameValue(t, s.params, decodeExact(t, effectiveParams(req))) {
			t.Fatalf("body %q: params %q do not mean what was sent", body, req.Params)
		}
	}
	if len(req.Params) == 0 || string(req.Params) == "null" {
		return req, true
	}
	canon, err := fingerprint.Normalize(req.Params)
	if err != nil || !bytes.Equal(canon, req.Params) {
		t.Fatalf("body %q: params %q are not canonical (Normalize: %q, %v)", body, req.Params, canon, err)
	}
	if _, ok := decodeExact(t, req.Params).(map[string]any); !ok {
		t.Fatalf("body %q: accepted params %q that are not an object", body, req.Params)
	}
	return req, true
}

// effectiveParams is what the handler fingerprints: absent or null params mean {}.
func effectiveParams(r operationRequest) []byte {
	if len(r.Params) == 0 || string(r.Params) == "null" {
		return []byte("{}")
	}
	return r.Params
}

// semantics is what a body asks for, read without the code under test.
type semantics struct {
	tool   string
	params any // absent and null read as an empty object, as the handler treats them
	// exactMembers says every top-level member name is spelled exactly as docs/API.md has it.
	exactMembers bool
}

// semanticsOf reads an accepted body with encoding/json (numbers kept exact). For bodies the
// decoder accepted, that is the whole truth: they hold no duplicates and only valid UTF-8.
func semanticsOf(t *testing.T, body []byte) semantics {
	t.Helper()
	m, ok := decodeExact(t, body).(map[string]any)
	if !ok {
		t.Fatalf("accepted body %q is not an object", body)
	}
	s := semantics{exactMembers: true, params: map[string]any{}}
	for k := range m {
		switch k {
		case "tool", "params", "workflow_run_id", "step_id":
		default:
			s.exactMembers = false
		}
	}
	s.tool, _ = m["tool"].(string)
	if p, ok := m["params"]; ok && p != nil {
		s.params = p
	}
	return s
}

// decodeExact decodes one JSON value with numbers kept as json.Number.
func decodeExact(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", data, err)
	}
	return v
}

// sameValue reports whether x and y are the same JSON value: same types, same strings, arrays
// equal element by element, objects with the same names and equal values, numbers equal as
// exact rationals.
func sameValue(t *testing.T, x, y any) bool {
	t.Helper()
	switch x := x.(type) {
	case nil:
		return y == nil
	case bool:
		y, ok := y.(bool)
		return ok && x == y
	case string:
		y, ok := y.(string)
		return ok && x == y
	case json.Number:
		y, ok := y.(json.Number)
		return ok && exactRat(t, string(x)).Cmp(exactRat(t, string(y))) == 0
	case []any:
		y, ok := y.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(t, x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !sameValue(t, xv, yv) {
				return false
			}
		}
		return true
	}
	t.Fatalf("unexpected JSON type %T", x)
	return false
}

// exactRat returns the exact value of a JSON number. big.Rat.SetString refuses exponents
// beyond ±1e6, which a literal like 0e99999999 or 0.000…1e1000000 can carry without being
// out of range, so the literal is first reduced to its significant digits and the exponent of
// the last one.
func exactRat(t *testing.T, lit string) *big.Rat {
	t.Helper()
	mant, expPart, hasExp := strings.Cut(strings.ToLower(lit), "e")
	exp := int64(0)
	if hasExp {
		var err error
		if exp, err = strconv.ParseInt(expPart, 10, 64); err != nil {
			t.Fatalf("number %q: exponent: %v", lit, err)
		}
	}
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= int64(len(frac))
	if digits == "" {
		return new(big.Rat)
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	sign := ""
	if neg {
		sign = "-"
	}
	r, ok := new(big.Rat).SetString(fmt.Sprintf("%s%se%d", sign, trimmed, exp))
	if !ok {
		t.Fatalf("number %q: big.Rat cannot hold %s%se%d", lit, sign, trimmed, exp)
	}
	return r
}

func TestDecodeOperationRequestAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   string
		tool   string
		params string
	}{
		{"tool and params", `{"tool":"tickets.create","params":{"subject":"x"}}`, "tickets.create", `{"subject":"x"}`},
		{"params canonicalised", `{"tool":"t","params":{ "b" : 1.0, "a" : 1e1 }}`, "t", `{"a":10,"b":1}`},
		{"escaped tool name", `{"tool":"tickets\u002ecreate"}`, "tickets.create", ``},
		{"params absent", `{"tool":"t"}`, "t", ``},
		{"params null", `{"tool":"t","params":null}`, "t", `null`},
		{"workflow and step", `{"tool":"t","params":{},"workflow_run_id":"w","step_id":"s"}`, "t", `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := decodeOperationRequest(strings.NewReader(tc.body))
			require.NoError(t, err)
			assert.Equal(t, tc.tool, req.Tool)
			assert.Equal(t, tc.params, string(req.Params))
		})
	}
}

func TestDecodeOperationRequestRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		slug string
	}{
		{"empty body", ``, problems.MalformedBody},
		{"not an object", `[]`, problems.MalformedBody},
		{"no tool", `{"params":{}}`, problems.MalformedBody},
		{"empty tool", `{"tool":""}`, problems.MalformedBody},
		{"tool not a string", `{"tool":1}`, problems.MalformedBody},
		{"unknown member", `{"tool":"t","extra":1}`, problems.MalformedBody},
		{"params an array", `{"tool":"t","params":[1]}`, problems.MalformedBody},
		{"params a string", `{"tool":"t","params":"x"}`, problems.MalformedBody},
		{"duplicate member", `{"tool":"t","params":{"a":1,"a":2}}`, problems.MalformedBody},
		{"duplicate member via escape", `{"tool":"t","params":{"a":1,"\u0061":2}}`, problems.MalformedBody},
		{"duplicate tool", `{"tool":"t","tool":"u"}`, problems.MalformedBody},
		{"inexact number", `{"tool":"t","params":{"a":9007199254740993}}`, problems.MalformedBody},
		{"number out of range", `{"tool":"t","params":{"a":1e400}}`, problems.MalformedBody},
		{"invalid UTF-8", "{\"tool\":\"t\xff\"}", problems.MalformedBody},
		{"lone surrogate", `{"tool":"t","params":{"a":"\ud800"}}`, problems.MalformedBody},
		{"byte order mark", "\xef\xbb\xbf{\"tool\":\"t\"}", problems.MalformedBody},
		{"trailing value", `{"tool":"t"} {"tool":"u"}`, problems.MalformedBody},
		{"truncated", `{"tool":"t"`, problems.MalformedBody},
		{"workflow_run_id too long", `{"tool":"t","workflow_run_id":"` + strings.Repeat("w", 256) + `"}`, problems.MalformedBody},
		{"step_id too long", `{"tool":"t","step_id":"` + strings.Repeat("s", 256) + `"}`, problems.MalformedBody},
		{"body over 1 MiB", `{"tool":"t"}` + strings.Repeat(" ", MaxBodyBytes), problems.BodyTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeOperationRequest(strings.NewReader(tc.body))
			var p *Problem
			require.ErrorAs(t, err, &p)
			assert.Equal(t, tc.slug, p.Slug, p.Detail)
		})
	}
}

func TestDecodeOperationRequestBodyOfExactlyOneMiB(t *testing.T) {
	t.Parallel()
	body := `{"tool":"t"}`
	body += strings.Repeat(" ", MaxBodyBytes-len(body))
	require.Len(t, body, MaxBodyBytes)
	req, err := decodeOperationRequest(strings.NewReader(body))
	require.NoError(t, err)
	assert.Equal(t, "t", req.Tool)
}

func TestDecodeOperationRequestReadError(t *testing.T) {
	t.Parallel()
	_, err := decodeOperationRequest(iotest.ErrReader(errors.New("connection reset")))
	var p *Problem
	require.ErrorAs(t, err, &p)
	assert.Equal(t, problems.MalformedBody, p.Slug)
}

// TestDecodeRejectsCaseVariantMembers: docs/API.md names the members tool, params,
// workflow_run_id and step_id, and the decoder means to refuse any other
// (DisallowUnknownFields). encoding/json matches names case-insensitively, so "TOOL" and
// "Params" are accepted as tool and params; a body with both "params" and "Params" is read as
// whichever sorts last. A strict reader of the same body (a proxy, a policy check, an audit
// log) sees something else.
func TestDecodeRejectsCaseVariantMembers(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"TOOL":"tickets.create","params":{"subject":"x"}}`,
		`{"tool":"tickets.create","Params":{"subject":"x"}}`,
		`{"tool":"refunds.issue","params":{"amount_cents":1},"Params":{"amount_cents":100000}}`,
	} {
		_, err := decodeOperationRequest(strings.NewReader(body))
		var p *Problem
		if assert.ErrorAs(t, err, &p, "body %s was accepted", body) {
			assert.Equal(t, problems.MalformedBody, p.Slug)
		}
	}
}
