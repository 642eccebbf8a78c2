// Package headers parses the request headers of the agent API that carry
// protocol meaning: Idempotency-Key and Prefer.
package headers

import (
	"errors"
	"fmt"
	"strings"
)

// MaxKeyLen is the longest operation key accepted, in bytes (and characters:
// keys are ASCII).
const MaxKeyLen = 255

var (
	// ErrKeyMissing means the request has no Idempotency-Key header, or
	// only empty ones.
	ErrKeyMissing = errors.New("idempotency key missing")
	// ErrKeyInvalid means the Idempotency-Key header is present but
	// malformed. The errors ParseIdempotencyKey returns wrap it with a
	// detail; test for it with errors.Is.
	ErrKeyInvalid = errors.New("idempotency key invalid")
)

// ParseIdempotencyKey returns the operation key named by the request's
// Idempotency-Key header values (all of them, as http.Header.Values returns
// them).
//
// The value, with optional whitespace (SP and HTAB) around it removed, is
// either an RFC 8941 string ("abc", in which only \" and \\ are escapes and
// nothing may follow the closing quote, parameters included) or a bare value
// taken as it is; both name the key between the quotes or as given, so
// "abc" and abc are the same key. The key must be 1 to MaxKeyLen printable
// ASCII characters (0x20 to 0x7E). A bare value cannot start with a quote,
// so a value that starts with one must be a valid string.
//
// No header, or only empty or whitespace-only ones, is ErrKeyMissing. More
// than one header line, even if one of them is empty, is ambiguous and
// therefore invalid. Every other failure wraps ErrKeyInvalid. Error details
// never quote the value, which is caller-supplied.
func ParseIdempotencyKey(values []string) (string, error) {
	blank := true
	for _, v := range values {
		if trimOWS(v) != "" {
			blank = false
			break
		}
	}
	if blank {
		return "", ErrKeyMissing
	}
	if len(values) > 1 {
		return "", invalid("the header appears %d times; send it once", len(values))
	}
	v := trimOWS(values[0])
	if v[0] != '"' {
		if err := checkKey(v, "key"); err != nil {
			return "", err
		}
		return v, nil
	}
	return parseSFString(v)
}

// parseSFString parses v, which starts with a double quote, as an RFC 8941
// sf-string that must make up all of v, and returns its content.
func parseSFString(v string) (string, error) {
	var b strings.Builder
	escaped := false
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 0x80:
			return "", nonASCII("quoted key", i+1)
		case c < 0x20 || c == 0x7F:
			return "", invalid("the quoted key contains the non-printable byte 0x%02X at position %d", c, i+1)
		case c == '\\':
			if i+1 >= len(v) || (v[i+1] != '"' && v[i+1] != '\\') {
				return "", invalid(`the quoted key contains a backslash at position %d not followed by '"' or '\'`, i+1)
			}
			if !escaped {
				escaped = true
				b.Grow(len(v))
				b.WriteString(v[1:i])
			}
			b.WriteByte(v[i+1])
			i++
		case c == '"':
			if i != len(v)-1 {
				return "", invalid("the quoted key is followed by other characters; parameters are not allowed")
			}
			key := v[1:i]
			if escaped {
				key = b.String()
			}
			if err := checkKey(key, "quoted key"); err != nil {
				return "", err
			}
			return key, nil
		default:
			if escaped {
				b.WriteByte(c)
			}
		}
	}
	return "", invalid("the quoted key has no closing quote")
}

// CheckKey reports whether key, taken as it is rather than as a header value
// (no quotes are removed and no whitespace trimmed), is a valid operation
// key: 1 to MaxKeyLen printable ASCII characters. Keys that arrive outside
// the header, such as an MCP call's operation_key, are checked with it; its
// errors wrap ErrKeyInvalid.
func CheckKey(key string) error { return checkKey(key, "key") }

// checkKey reports whether key has an allowed length and only printable
// ASCII characters.
func checkKey(key, what string) error {
	if key == "" {
		return invalid("the %s is empty", what)
	}
	if len(key) > MaxKeyLen {
		return invalid("the %s is %d characters long; at most %d are allowed", what, len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c >= 0x80:
			return nonASCII(what, i+1)
		case c < 0x20 || c == 0x7F:
			return invalid("the %s contains the non-printable byte 0x%02X at position %d; only printable ASCII is allowed", what, c, i+1)
		}
	}
	return nil
}

// nonASCII is the error for a key with a byte of 0x80 or more at (1-based) byte position pos:
// a letter such as "é" (UTF-8) or a byte of another encoding, either way not ASCII. The key is
// caller-supplied, so the character is not quoted.
func nonASCII(what string, pos int) error {
	return invalid("the %s contains a non-ASCII character at byte %d; only printable ASCII (0x20 to 0x7E) is allowed", what, pos)
}

// keyError is an ErrKeyInvalid with a detail.
type keyError struct{ detail string }

func (e *keyError) Error() string { return ErrKeyInvalid.Error() + ": " + e.detail }
func (e *keyError) Unwrap() error { return ErrKeyInvalid }

func invalid(format string, args ...any) error {
	return &keyError{detail: fmt.Sprintf(format, args...)}
}

// trimOWS removes optional whitespace (SP and HTAB) from both ends of s.
func trimOWS(s string) string {
	return strings.Trim(s, " \t")
}
