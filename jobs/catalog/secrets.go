package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// MinSecretLen is the length in bytes of the shortest sensitive value searched for in what a
// downstream sends back. Shorter ones (a 3-digit code, "1", "true") would match unrelated
// text everywhere and make answers unreadable, so they are masked only where they are params.
const MinSecretLen = 4

// Secrets are the sensitive values of one call, in every form a downstream might echo them:
// as they are, escaped inside a JSON string (minimally, or HTML-safe as Go writes it), and
// URL-escaped (a path segment, a query value). Scrubbing replaces each with Masked. It is
// applied once, where a downstream's answer enters the gateway, before anything is recorded,
// logged or traced, so no reader of the ledger ever sees an echo. A nil *Secrets scrubs
// nothing and costs nothing.
type Secrets struct {
	values   []string // as given
	forms    []string // every searched form, longest first
	replacer *strings.Replacer
}

// Secrets returns the sensitive values of a call with params (decoded with UseNumber), or nil
// when the tool declares none or none is present and long enough to search for. An object or
// array at a sensitive pointer makes each of its strings and numbers sensitive.
func (t *Tool) Secrets(params map[string]any) *Secrets {
	if len(t.SensitiveParams) == 0 || params == nil {
		return nil
	}
	var values []string
	for _, p := range t.SensitiveParams {
		ptr, err := sensitivePointer(p)
		if err != nil {
			continue
		}
		if v, ok := Resolve(params, ptr); ok {
			values = appendLeaves(values, v)
		}
	}
	return newSecrets(values)
}

// NewSecrets returns the Secrets of the given values (for calls built outside a catalogue).
func NewSecrets(values ...string) *Secrets { return newSecrets(values) }

func newSecrets(values []string) *Secrets {
	var forms []string
	add := func(f string) {
		if len(f) >= MinSecretLen && !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	for _, v := range values {
		if len(v) < MinSecretLen {
			continue
		}
		add(v)
		add(jsonEscaped(v, false))
		add(jsonEscaped(v, true))
		add(url.PathEscape(v))
		add(url.QueryEscape(v))
	}
	if len(forms) == 0 {
		return nil
	}
	// Longest first: where one form contains another, the whole of it goes.
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Masked)
	}
	return &Secrets{values: values, forms: forms, replacer: strings.NewReplacer(pairs...)}
}

// With returns s with more values to scrub (a connection's credentials, docs/TOOLS.md): they are
// masked exactly as a sensitive param's echo is. s itself is unchanged; nil is fine.
func (s *Secrets) With(values ...string) *Secrets {
	if len(values) == 0 {
		return s
	}
	var all []string
	if s != nil {
		all = append(all, s.values...)
	}
	return newSecrets(append(all, values...))
}

// Merge returns the Secrets of both s and o; either may be nil.
func (s *Secrets) Merge(o *Secrets) *Secrets {
	if o == nil {
		return s
	}
	return s.With(o.values...)
}

func appendLeaves(dst []string, v any) []string {
	switch v := v.(type) {
	case string:
		return append(dst, v)
	case json.Number:
		return append(dst, v.String())
	case float64:
		return append(dst, strconv.FormatFloat(v, 'f', -1, 64))
	case map[string]any:
		for _, e := range v {
			dst = appendLeaves(dst, e)
		}
	case []any:
		for _, e := range v {
			dst = appendLeaves(dst, e)
		}
	}
	return dst // booleans and null carry too little to search for
}

// jsonEscaped is s as it appears between the quotes of a JSON string.
func jsonEscaped(s string, htmlSafe bool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(htmlSafe)
	_ = enc.Encode(s) // a string always encodes
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return string(b[1 : len(b)-1])
}

// Text returns s with every form of every secret replaced by Masked.
func (s *Secrets) Text(text string) string {
	if s == nil || !s.inString(text) {
		return text
	}
	return s.replacer.Replace(text)
}

// Error returns err with its message scrubbed, or err itself when there is nothing to scrub.
// The scrubbed error keeps no chain: classify errors before scrubbing them.
func (s *Secrets) Error(err error) error {
	if err == nil || s == nil {
		return err
	}
	msg := err.Error()
	if scrubbed := s.Text(msg); scrubbed != msg {
		return errors.New(scrubbed)
	}
	return err
}

// Body returns a downstream's answer with every secret replaced by Masked. A JSON body stays
// JSON, with its members in their order: the secrets are replaced inside its strings (however
// they are escaped there) and a number that holds one becomes "***". Any other body is
// scrubbed as text. A body with nothing to scrub is returned as it is.
func (s *Secrets) Body(body []byte) []byte {
	if s == nil || len(body) == 0 {
		return body
	}
	// An escape may hide a secret from the byte search (Python writes "é" as "\u00e9"), so
	// a body with any backslash takes the careful path.
	if !s.inBytes(body) && bytes.IndexByte(body, '\\') < 0 {
		return body
	}
	if json.Valid(body) {
		if out, err := s.rewriteJSON(body); err == nil {
			return out
		}
	}
	return []byte(s.Text(string(body)))
}

func (s *Secrets) inString(text string) bool {
	for _, f := range s.forms {
		if strings.Contains(text, f) {
			return true
		}
	}
	return false
}

func (s *Secrets) inBytes(b []byte) bool {
	for _, f := range s.forms {
		if bytes.Contains(b, []byte(f)) {
			return true
		}
	}
	return false
}

// rewriteJSON writes the JSON value body compactly, token by token, with its strings and
// numbers scrubbed.
func (s *Secrets) rewriteJSON(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	out := make([]byte, 0, len(body))
	type frame struct {
		object bool
		n      int // tokens so far: in an object, names and values alternate
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			out = append(out, byte(d))
			stack = stack[:len(stack)-1]
			continue
		}
		if len(stack) > 0 {
			f := &stack[len(stack)-1]
			switch {
			case f.object && f.n%2 == 1:
				out = append(out, ':')
			case f.n > 0:
				out = append(out, ',')
			}
			f.n++
		}
		switch v := tok.(type) {
		case json.Delim:
			out = append(out, byte(v))
			stack = append(stack, frame{object: v == '{'})
		case string:
			out = appendJSONString(out, s.Text(v))
		case json.Number:
			if s.Text(v.String()) != v.String() {
				out = appendJSONString(out, Masked)
			} else {
				out = append(out, v...)
			}
		case bool:
			out = strconv.AppendBool(out, v)
		case nil:
			out = append(out, "null"...)
		}
	}
}

func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = append(dst, jsonEscaped(s, false)...)
	return append(dst, '"')
}

// MasksParam reports whether the tool masks the top-level param name, or something inside it:
// a search by its value would be a search by a sensitive value.
func (t *Tool) MasksParam(name string) bool {
	for _, p := range t.SensitiveParams {
		ptr, err := sensitivePointer(p)
		if err != nil {
			continue
		}
		if tokens, err := parsePointer(ptr); err == nil && len(tokens) > 0 && tokens[0] == name {
			return true
		}
	}
	return false
}
