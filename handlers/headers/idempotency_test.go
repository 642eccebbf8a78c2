package headers

import (
	"errors"
	"strings"
	"testing"
)

func TestParseIdempotencyKey(t *testing.T) {
	k255 := strings.Repeat("k", 255)
	k256 := strings.Repeat("k", 256)
	cases := []struct {
		name    string
		values  []string
		want    string
		wantErr error
	}{
		{"bare", []string{"workflow-8472:create-ticket"}, "workflow-8472:create-ticket", nil},
		{"quoted", []string{`"abc"`}, "abc", nil},
		{"bare abc", []string{"abc"}, "abc", nil},
		{"escaped quote", []string{`"a\"b"`}, `a"b`, nil},
		{"escaped backslash", []string{`"a\\b"`}, `a\b`, nil},
		{"only escapes", []string{`"\"\\"`}, `"\`, nil},
		{"surrounding whitespace", []string{" \t abc \t"}, "abc", nil},
		{"surrounding whitespace quoted", []string{`  "abc"	`}, "abc", nil},
		{"quoted keeps inner spaces", []string{`" abc "`}, " abc ", nil},
		{"bare with inner space", []string{"a b"}, "a b", nil},
		{"bare with quote inside", []string{`a"b`}, `a"b`, nil},
		{"bare with backslash", []string{`a\b`}, `a\b`, nil},
		{"bare punctuation", []string{"!#$%&'()*+,-./:;<=>?@[]^_`{|}~"}, "!#$%&'()*+,-./:;<=>?@[]^_`{|}~", nil},
		{"one character", []string{"x"}, "x", nil},
		{"quoted single space", []string{`" "`}, " ", nil},
		{"255 characters", []string{k255}, k255, nil},
		{"255 characters quoted", []string{`"` + k255 + `"`}, k255, nil},
		{"255 characters after unescaping", []string{`"` + strings.Repeat(`\"`, 255) + `"`}, strings.Repeat(`"`, 255), nil},

		{"no header", nil, "", ErrKeyMissing},
		{"empty slice", []string{}, "", ErrKeyMissing},
		{"empty value", []string{""}, "", ErrKeyMissing},
		{"whitespace value", []string{" \t "}, "", ErrKeyMissing},
		{"several empty values", []string{"", " "}, "", ErrKeyMissing},

		{"two values", []string{"a", "b"}, "", ErrKeyInvalid},
		{"two equal values", []string{"a", "a"}, "", ErrKeyInvalid},
		{"value and empty", []string{"a", ""}, "", ErrKeyInvalid},
		{"256 characters", []string{k256}, "", ErrKeyInvalid},
		{"256 characters quoted", []string{`"` + k256 + `"`}, "", ErrKeyInvalid},
		{"empty quoted", []string{`""`}, "", ErrKeyInvalid},
		{"empty quoted with spaces", []string{` "" `}, "", ErrKeyInvalid},
		{"control character", []string{"a\x01b"}, "", ErrKeyInvalid},
		{"tab inside", []string{"a\tb"}, "", ErrKeyInvalid},
		{"newline", []string{"a\nb"}, "", ErrKeyInvalid},
		{"DEL", []string{"a\x7fb"}, "", ErrKeyInvalid},
		{"NUL", []string{"a\x00"}, "", ErrKeyInvalid},
		{"non-ASCII", []string{"café"}, "", ErrKeyInvalid},
		{"non-ASCII quoted", []string{`"café"`}, "", ErrKeyInvalid},
		{"control character quoted", []string{"\"a\x01b\""}, "", ErrKeyInvalid},
		{"tab quoted", []string{"\"a\tb\""}, "", ErrKeyInvalid},
		{"unterminated", []string{`"abc`}, "", ErrKeyInvalid},
		{"lone quote", []string{`"`}, "", ErrKeyInvalid},
		{"escaped closing quote", []string{`"abc\"`}, "", ErrKeyInvalid},
		{"trailing backslash", []string{`"abc\`}, "", ErrKeyInvalid},
		{"bad escape", []string{`"a\nb"`}, "", ErrKeyInvalid},
		{"unicode escape", []string{`"a\u0041"`}, "", ErrKeyInvalid},
		{"parameters", []string{`"abc";a=1`}, "", ErrKeyInvalid},
		{"text after string", []string{`"abc"def`}, "", ErrKeyInvalid},
		{"two strings", []string{`"a" "b"`}, "", ErrKeyInvalid},
		{"inner unescaped quote", []string{`"a"b"`}, "", ErrKeyInvalid},
		{"bare starting with quote", []string{`"abc`}, "", ErrKeyInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseIdempotencyKey(tc.values)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ParseIdempotencyKey(%q) = %q, %v; want %v", tc.values, got, err, tc.wantErr)
				}
				if got != "" {
					t.Errorf("ParseIdempotencyKey(%q) returned key %q with an error", tc.values, got)
				}
				if tc.wantErr == ErrKeyInvalid && errors.Is(err, ErrKeyMissing) {
					t.Errorf("error %v is both invalid and missing", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseIdempotencyKey(%q) = %q, %v; want %q", tc.values, got, err, tc.want)
			}
		})
	}
}

func TestParseIdempotencyKeySameKey(t *testing.T) {
	bare, err1 := ParseIdempotencyKey([]string{"abc"})
	quoted, err2 := ParseIdempotencyKey([]string{`"abc"`})
	if err1 != nil || err2 != nil || bare != quoted {
		t.Errorf(`abc = %q, %v; "abc" = %q, %v; want the same key`, bare, err1, quoted, err2)
	}
}

func TestParseIdempotencyKeyErrorDetail(t *testing.T) {
	_, err := ParseIdempotencyKey([]string{strings.Repeat("k", 300)})
	if err == nil || !strings.Contains(err.Error(), "300 characters long") || strings.Contains(err.Error(), "kkkk") {
		t.Errorf("err = %v, want a detail with the length and without the key", err)
	}
	_, err = ParseIdempotencyKey([]string{"a\x01"})
	if err == nil || !strings.Contains(err.Error(), "0x01") {
		t.Errorf("err = %v, want a detail naming the byte", err)
	}
}

// quoteSF writes key as an RFC 8941 sf-string.
func quoteSF(key string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(key) + `"`
}

func FuzzParseIdempotencyKey(f *testing.F) {
	seeds := []string{
		"abc", `"abc"`, `"a\"b"`, `"a\\b"`, `a"b`, `""`, `"`, `"abc`, `"abc"x`, `"abc";p=1`, " abc ",
		"\tabc", "a\x01b", "a\x7f", "é", `"\u0041"`, `"\n"`, `\`, `"\`, "workflow-8472:create-ticket",
		strings.Repeat("k", 255), strings.Repeat("k", 256), `"` + strings.Repeat("k", 255) + `"`,
		`"` + strings.Repeat(`\\`, 255) + `"`, `"` + strings.Repeat(`\\`, 256) + `"`, "",
	}
	for _, s := range seeds {
		f.Add(s, false, "")
	}
	f.Add("a", true, "b")
	f.Add("a", true, "")
	f.Fuzz(func(t *testing.T, v string, two bool, second string) {
		values := []string{v}
		if two {
			values = append(values, second)
		}
		key, err := ParseIdempotencyKey(values)
		if err != nil {
			if key != "" {
				t.Fatalf("ParseIdempotencyKey(%q) returned key %q with error %v", values, key, err)
			}
			if !errors.Is(err, ErrKeyMissing) && !errors.Is(err, ErrKeyInvalid) {
				t.Fatalf("ParseIdempotencyKey(%q): unexpected error %v", values, err)
			}
			return
		}
		if len(key) < 1 || len(key) > MaxKeyLen {
			t.Fatalf("ParseIdempotencyKey(%q) = %q: length %d", values, key, len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7E {
				t.Fatalf("ParseIdempotencyKey(%q) = %q: byte 0x%02x is not printable ASCII", values, key, key[i])
			}
		}
		// Every accepted key, written as an sf-string, names itself.
		if again, err := ParseIdempotencyKey([]string{quoteSF(key)}); err != nil || again != key {
			t.Fatalf("key %q as %s parses to %q, %v", key, quoteSF(key), again, err)
		}
		// A key accepted bare, and the same key as an sf-string, are
		// the same key.
		if len(v) > 0 && strings.TrimLeft(v, " \t")[0] != '"' {
			if key != strings.Trim(v, " \t") {
				t.Fatalf("bare value %q parsed to %q", v, key)
			}
			if quoted, err := ParseIdempotencyKey([]string{" " + quoteSF(key) + "\t"}); err != nil || quoted != key {
				t.Fatalf("bare %q = %q but quoted %s = %q, %v", v, key, quoteSF(key), quoted, err)
			}
		}
	})
}

// TestNonASCIIKeyDetail: a key with a letter outside ASCII is refused for being non-ASCII, not
// as "non-printable" (é is printable); a control character still is non-printable.
func TestNonASCIIKeyDetail(t *testing.T) {
	for _, v := range [][]string{{"café"}, {`"café"`}, {"caf\xe9"}} {
		_, err := ParseIdempotencyKey(v)
		if err == nil || !strings.Contains(err.Error(), "non-ASCII character at byte") || strings.Contains(err.Error(), "non-printable") {
			t.Errorf("ParseIdempotencyKey(%q): err = %v, want a non-ASCII detail", v, err)
		}
	}
	if err := CheckKey("naïve"); err == nil || !strings.Contains(err.Error(), "non-ASCII") || !errors.Is(err, ErrKeyInvalid) {
		t.Errorf("CheckKey: err = %v, want a non-ASCII ErrKeyInvalid", err)
	}
	if err := CheckKey("a\x7f"); err == nil || !strings.Contains(err.Error(), "non-printable byte 0x7F") {
		t.Errorf("CheckKey(DEL): err = %v, want non-printable", err)
	}
}
