package fingerprint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// viaJCS computes a fingerprint the long way: it builds the envelope with
// encoding/json and canonicalises the whole of it with jcs.
func viaJCS(t *testing.T, tool string, params []byte) string {
	t.Helper()
	env, err := json.Marshal(map[string]any{"tool": tool, "params": json.RawMessage(params)})
	if err != nil {
		t.Fatalf("marshal envelope: %v", err)
	}
	canon, err := jcs.Transform(env)
	if err != nil {
		t.Fatalf("jcs.Transform(%s): %v", env, err)
	}
	sum := sha256.Sum256(canon)
	return Prefix + hex.EncodeToString(sum[:])
}

func mustFingerprint(t *testing.T, tool, params string) string {
	t.Helper()
	fp, err := Fingerprint(tool, []byte(params))
	if err != nil {
		t.Fatalf("Fingerprint(%q, %s): %v", tool, params, err)
	}
	return fp
}

func TestFingerprintSame(t *testing.T) {
	groups := []struct {
		name  string
		tool  string
		forms []string
	}{
		{"key order", "tickets.create", []string{
			`{"subject":"Printer on fire","priority":2}`,
			`{"priority":2,"subject":"Printer on fire"}`,
		}},
		{"whitespace", "tickets.create", []string{
			`{"subject":"Printer on fire","tags":["a","b"]}`,
			"{ \"subject\" : \"Printer on fire\" ,\n\t\"tags\" : [ \"a\" , \"b\" ] }\n",
			"\r\n{\"tags\":[\"a\",\"b\"],\"subject\":\"Printer on fire\"}  ",
		}},
		{"number spelling", "payments.refund", []string{
			`{"amount":10}`, `{"amount":10.0}`, `{"amount":1e1}`, `{"amount":1E+1}`,
			`{"amount":100e-1}`, `{"amount":10.000}`, `{"amount":0.1e2}`,
		}},
		{"fractions", "payments.refund", []string{`{"amount":0.1}`, `{"amount":1e-1}`, `{"amount":0.10}`}},
		{"negative zero", "payments.refund", []string{`{"amount":0}`, `{"amount":-0}`, `{"amount":-0.0}`, `{"amount":0e5}`}},
		{"unicode escapes", "tickets.create", []string{
			`{"subject":"\u00e9"}`, `{"subject":"é"}`, `{"subject":"\u00E9"}`,
		}},
		{"escaped names", "tickets.create", []string{`{"subject":"x"}`, `{"\u0073ubject":"x"}`}},
		{"solidus", "tickets.create", []string{`{"url":"a/b"}`, `{"url":"a\/b"}`}},
		{"surrogate pairs", "tickets.create", []string{`{"s":"😀"}`, `{"s":"\ud83d\ude00"}`, `{"s":"\uD83D\uDE00"}`}},
		{"nested", "crm.update", []string{
			`{"a":{"y":[1,{"q":true,"p":null}],"x":1.50}}`,
			`{"a":{"x":1.5,"y":[1e0,{"p":null,"q":true}]}}`,
		}},
	}
	for _, g := range groups {
		want := mustFingerprint(t, g.tool, g.forms[0])
		if len(want) != Len || !strings.HasPrefix(want, Prefix) {
			t.Errorf("%s: malformed fingerprint %q", g.name, want)
		}
		for _, form := range g.forms {
			if got := mustFingerprint(t, g.tool, form); got != want {
				t.Errorf("%s: %s has fingerprint %s, %s has %s", g.name, form, got, g.forms[0], want)
			}
			canon, _ := Normalize([]byte(form))
			if got := viaJCS(t, g.tool, canon); got != want {
				t.Errorf("%s: %s: Of = %s, jcs of the whole envelope = %s", g.name, form, want, got)
			}
		}
	}
}

func TestFingerprintDiffers(t *testing.T) {
	pairs := []struct {
		name         string
		toolA, toolB string
		a, b         string
	}{
		{"string vs number", "t", "t", `{"amount":"10"}`, `{"amount":10}`},
		{"tool name", "payments.refund", "payments.refunds", `{"amount":10}`, `{"amount":10}`},
		{"tool name case", "payments.refund", "Payments.refund", `{"amount":10}`, `{"amount":10}`},
		{"different numbers", "t", "t", `{"amount":10}`, `{"amount":10.000000000000002}`},
		{"close numbers", "t", "t", `{"n":9007199254740991}`, `{"n":9007199254740992}`},
		{"array order", "t", "t", `[1,2]`, `[2,1]`},
		{"null vs absent", "t", "t", `{"a":null}`, `{}`},
		{"null vs false", "t", "t", `{"a":null}`, `{"a":false}`},
		{"empty object vs array", "t", "t", `{}`, `[]`},
		{"nesting", "t", "t", `[[1]]`, `[1]`},
		{"string content", "t", "t", `"a"`, `"a "`},
		{"NFC vs NFD", "t", "t", `"\u00e9"`, `"e\u0301"`},
		{"params vs whole", "t", "t", `{"params":{},"tool":"t"}`, `{}`},
	}
	for _, p := range pairs {
		a := mustFingerprint(t, p.toolA, p.a)
		b := mustFingerprint(t, p.toolB, p.b)
		if a == b {
			t.Errorf("%s: %s/%s and %s/%s share fingerprint %s", p.name, p.toolA, p.a, p.toolB, p.b, a)
		}
	}
}

// TestOfMatchesJCSEnvelope checks that the envelope Of hashes is exactly the
// JCS canonical form of {"tool":tool,"params":params}, including for tool
// names that need escaping.
func TestOfMatchesJCSEnvelope(t *testing.T) {
	tools := []string{"", "tickets.create", "a\"b", `back\slash`, "tab\there", "\x00\x1f\x7f", "é😀", "\u2028"}
	for _, tool := range tools {
		for _, tc := range canonicalCases {
			canon, err := Normalize([]byte(tc.in))
			if err != nil {
				t.Fatalf("Normalize(%q): %v", tc.in, err)
			}
			if got, want := Of(tool, canon), viaJCS(t, tool, canon); got != want {
				t.Errorf("Of(%q, %s) = %s, want %s", tool, canon, got, want)
			}
		}
	}
	// A known value, so that an accidental change of the envelope shows.
	sum := sha256.Sum256([]byte(`{"params":{"subject":"Printer on fire"},"tool":"tickets.create"}`))
	want := "sha256:" + hex.EncodeToString(sum[:])
	if got := mustFingerprint(t, "tickets.create", `{"subject": "Printer on fire"}`); got != want {
		t.Errorf("fingerprint = %s, want %s", got, want)
	}
}

func TestOfInvalidUTF8Tool(t *testing.T) {
	got := Of("a\xffb", []byte(`{}`))
	if want := Of("a\uFFFDb", []byte(`{}`)); got != want {
		t.Errorf("Of with invalid UTF-8 = %s, want the U+FFFD form %s", got, want)
	}
}

func TestFingerprintError(t *testing.T) {
	_, err := Fingerprint("t", []byte(`{"a":1,"a":2}`))
	if !errors.Is(err, ErrNotIJSON) {
		t.Errorf("err = %v, want ErrNotIJSON", err)
	}
}
