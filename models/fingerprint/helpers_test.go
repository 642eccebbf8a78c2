package fingerprint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
)

// decodeExact decodes one JSON value with numbers kept as json.Number.
func decodeExact(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// sameJSON reports whether a and b hold the same JSON value: same types,
// same strings, arrays equal element by element, objects with the same
// member names and equal values, and numbers equal as exact rationals (so
// 10, 10.0 and 1e1 are equal, and so are 0 and -0). It is deliberately
// independent of the code under test.
func sameJSON(a, b []byte) (bool, error) {
	x, err := decodeExact(a)
	if err != nil {
		return false, fmt.Errorf("decoding %q: %w", a, err)
	}
	y, err := decodeExact(b)
	if err != nil {
		return false, fmt.Errorf("decoding %q: %w", b, err)
	}
	return sameValue(x, y)
}

func sameValue(x, y any) (bool, error) {
	switch x := x.(type) {
	case nil:
		return y == nil, nil
	case bool:
		y, ok := y.(bool)
		return ok && x == y, nil
	case string:
		y, ok := y.(string)
		return ok && x == y, nil
	case json.Number:
		y, ok := y.(json.Number)
		if !ok {
			return false, nil
		}
		rx, ok := parseRat(string(x))
		if !ok {
			return false, fmt.Errorf("big.Rat cannot parse %q", x)
		}
		ry, ok := parseRat(string(y))
		if !ok {
			return false, fmt.Errorf("big.Rat cannot parse %q", y)
		}
		return rx.Cmp(ry) == 0, nil
	case []any:
		y, ok := y.([]any)
		if !ok || len(x) != len(y) {
			return false, nil
		}
		for i := range x {
			if same, err := sameValue(x[i], y[i]); !same || err != nil {
				return false, err
			}
		}
		return true, nil
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false, nil
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok {
				return false, nil
			}
			if same, err := sameValue(xv, yv); !same || err != nil {
				return false, err
			}
		}
		return true, nil
	}
	return false, fmt.Errorf("unexpected type %T", x)
}

// parseRat parses a JSON number as an exact rational. big.Rat refuses
// enormous exponents even on a zero mantissa, so zero is handled first.
func parseRat(s string) (*big.Rat, bool) {
	mant, _, _ := strings.Cut(strings.ToLower(s), "e")
	if strings.Trim(mant, "-+0.") == "" {
		return new(big.Rat), true
	}
	return new(big.Rat).SetString(s)
}
