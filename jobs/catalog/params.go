package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// ParamError is one way params fail the tool's schema, as served in the invalid-params problem.
type ParamError struct {
	Pointer string `json:"pointer"` // JSON pointer into params, "" for params as a whole
	Message string `json:"message"`
}

// Masked is what a sensitive value is replaced with outside the downstream request.
const Masked = "***"

var printer = message.NewPrinter(language.English)

// CheckCanonical decodes params, which must be canonical JSON (fingerprint.Normalize's
// output), and checks them against the schema, as ValidateParams does. A decoding error means
// they are no JSON value at all. Params that passed before are not decoded or checked again.
func (t *Tool) CheckCanonical(params []byte) ([]ParamError, error) {
	if t.memo.has(params) {
		return []ParamError{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	errs := t.ValidateParams(v)
	if len(errs) == 0 {
		t.memo.add(params)
	}
	return errs, nil
}

// ValidateParams checks params, as decoded by encoding/json with UseNumber (so numbers are
// json.Number; float64 and Go integers are accepted too), against the tool's schema. It returns
// one ParamError per failed leaf check, sorted by pointer, and an empty slice when params are
// valid. A missing required property or a forbidden additional property is reported at the
// property's own pointer ("/subject"), which is where an agent has to act.
func (t *Tool) ValidateParams(params any) (errs []ParamError) {
	errs = []ParamError{}
	if t.Schema == nil {
		return errs // a Tool built by hand without a schema accepts anything
	}
	defer func() {
		// The validator indexes into what it is given; input no JSON decoder produces (a NaN,
		// a malformed json.Number) must answer 400, not take the server down.
		if r := recover(); r != nil {
			errs = []ParamError{{Pointer: "", Message: "params are not valid JSON values"}}
		}
	}()
	errs = append(errs, t.keyParamErrors(params)...)
	errs = append(errs, t.formNameErrors(params)...)
	err := t.Schema.Validate(params)
	if err == nil {
		return errs
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []ParamError{{Pointer: "", Message: err.Error()}}
	}
	seen := map[ParamError]bool{}
	collectLeaves(verr, t.nearSensitive, func(pe ParamError) {
		if !seen[pe] {
			seen[pe] = true
			errs = append(errs, pe)
		}
	})
	sort.SliceStable(errs, func(i, j int) bool {
		if errs[i].Pointer != errs[j].Pointer {
			return errs[i].Pointer < errs[j].Pointer
		}
		return errs[i].Message < errs[j].Message
	})
	return errs
}

// collectLeaves emits the leaf errors of e. The validator's own message quotes the value it
// refused, in its own escaping (which a scrubber looking for the value as sent does not find);
// where the value is or holds a sensitive param (hide), the message names only the keyword.
func collectLeaves(e *jsonschema.ValidationError, hide func(loc []string) bool, emit func(ParamError)) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			collectLeaves(c, hide, emit)
		}
		return
	}
	loc := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, p := range k.Missing {
			emit(ParamError{Pointer: pointerOf(append(loc[:len(loc):len(loc)], p)), Message: "required property is missing"})
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			emit(ParamError{Pointer: pointerOf(append(loc[:len(loc):len(loc)], p)), Message: "property is not allowed"})
		}
	default:
		msg := e.ErrorKind.LocalizedString(printer)
		if hide(loc) && quotesValue(e.ErrorKind) {
			msg = "the value does not satisfy the schema's " + strings.Join(e.ErrorKind.KeywordPath(), "/") +
				" (it is sensitive, so it is not repeated here)"
		}
		emit(ParamError{Pointer: pointerOf(loc), Message: msg})
	}
}

// quotesValue reports whether the validator's message for k may repeat the value refused:
// every kind but those that say only what the value's type or size is.
func quotesValue(k jsonschema.ErrorKind) bool {
	switch k.(type) {
	case *kind.Type, *kind.MinLength, *kind.MaxLength, *kind.MinItems, *kind.MaxItems,
		*kind.MinProperties, *kind.MaxProperties:
		return false
	}
	return true
}

// nearSensitive reports whether the value at loc is a sensitive param, is inside one, or holds
// one: a message about it could quote a sensitive value.
func (t *Tool) nearSensitive(loc []string) bool {
	for _, p := range t.SensitiveParams {
		ptr, err := sensitivePointer(p)
		if err != nil {
			return true // cannot tell: say nothing of the value
		}
		tokens, _ := parsePointer(ptr)
		n := min(len(tokens), len(loc))
		if slices.Equal(tokens[:n], loc[:n]) {
			return true
		}
	}
	return false
}

// Mask returns a deep copy of params in which every sensitive pointer that exists holds Masked.
// params is not modified. Only JSON values (maps, slices, scalars) are traversed.
func (t *Tool) Mask(params any) any {
	out := deepCopy(params)
	for _, p := range t.SensitiveParams {
		// Load stores pointers; normalising again keeps a hand-built Tool's bare names masked.
		ptr, err := sensitivePointer(p)
		if err != nil {
			continue
		}
		tokens, _ := parsePointer(ptr)
		maskAt(out, tokens)
	}
	return out
}

func maskAt(v any, tokens []string) {
	for i, tok := range tokens {
		last := i == len(tokens)-1
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return
			}
			if last {
				c[tok] = Masked
				return
			}
			v = next
		case []any:
			idx, ok := arrayIndex(tok, len(c))
			if !ok {
				return
			}
			if last {
				c[idx] = Masked
				return
			}
			v = c[idx]
		default:
			return
		}
	}
}

// MaskCanonical masks canonical JSON params (fingerprint.Normalize's output, as the ledger
// stores them). When the tool has nothing to mask they are returned as they are: already
// compact, in key order, and decoding and encoding them again would change nothing.
func (t *Tool) MaskCanonical(canonical []byte) ([]byte, error) {
	if len(t.SensitiveParams) == 0 {
		return canonical, nil
	}
	return t.MaskJSON(canonical)
}

// MaskJSON masks raw JSON params (see Mask). Numbers keep their spelling; object keys come out
// sorted and the JSON compact, as encoding/json writes them.
func (t *Tool) MaskJSON(raw []byte) ([]byte, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("mask params: %w", err)
	}
	out, err := encodeJSON(t.Mask(v))
	if err != nil {
		return nil, fmt.Errorf("mask params: %w", err)
	}
	return out, nil
}

// decodeJSON decodes one JSON value, numbers as json.Number, refusing anything after it.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// encodeJSON writes v compact, with sorted object keys, leaving "<", ">" and "&" as they are:
// params are data, not HTML.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// deepCopy copies the maps and slices of a JSON value; scalars are immutable and shared.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}
