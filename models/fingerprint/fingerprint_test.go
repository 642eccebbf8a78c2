package fingerprint

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// testKeyRaw keys the fingerprints of these tests.
var testKeyRaw = []byte("0123456789abcdef0123456789abcdef")

var testKey = mustKey(testKeyRaw)

func mustKey(raw []byte) *Key {
	k, err := NewKey(raw)
	if err != nil {
		panic(err)
	}
	return k
}

// envelopeViaJCS builds the envelope the long way: with encoding/json, canonicalising the
// whole of it with jcs.
func envelopeViaJCS(t *testing.T, tool string, params []byte) []byte {
	t.Helper()
	env, err := json.Marshal(map[string]any{"tool": tool, "params": json.RawMessage(params)})
	if err != nil {
		t.Fatalf("marshal envelope: %v", err)
	}
	canon, err := jcs.Transform(env)
	if err != nil {
		t.Fatalf("jcs.Transform(%s): %v", env, err)
	}
	return canon
}

// viaJCS computes a keyed fingerprint the long way, with crypto/hmac over envelopeViaJCS.
func viaJCS(t *testing.T, tool string, params []byte) string {
	t.Helper()
	mac := hmac.New(sha256.New, testKeyRaw)
	mac.Write(envelopeViaJCS(t, tool, params))
	return Prefix + hex.EncodeToString(mac.Sum(nil))
}

// legacyViaJCS computes a plain fingerprint the long way.
func legacyViaJCS(t *testing.T, tool string, params []byte) string {
	t.Helper()
	sum := sha256.Sum256(envelopeViaJCS(t, tool, params))
	return LegacyPrefix + hex.EncodeToString(sum[:])
}

func mustFingerprint(t *testing.T, tool, params string) string {
	t.Helper()
	fp, err := testKey.Fingerprint(tool, []byte(params))
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
			if got, want := testKey.Of(tool, canon), viaJCS(t, tool, canon); got != want {
				t.Errorf("Of(%q, %s) = %s, want %s", tool, canon, got, want)
			}
			if got, want := Legacy(tool, canon), legacyViaJCS(t, tool, canon); got != want {
				t.Errorf("Legacy(%q, %s) = %s, want %s", tool, canon, got, want)
			}
		}
	}
	// Known values, so that an accidental change of the envelope or the MAC shows.
	envelope := []byte(`{"params":{"subject":"Printer on fire"},"tool":"tickets.create"}`)
	mac := hmac.New(sha256.New, testKeyRaw)
	mac.Write(envelope)
	want := "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil))
	if got := mustFingerprint(t, "tickets.create", `{"subject": "Printer on fire"}`); got != want {
		t.Errorf("fingerprint = %s, want %s", got, want)
	}
	sum := sha256.Sum256(envelope)
	if got, want := Legacy("tickets.create", []byte(`{"subject":"Printer on fire"}`)), "sha256:"+hex.EncodeToString(sum[:]); got != want {
		t.Errorf("legacy fingerprint = %s, want %s", got, want)
	}
}

// TestKeyed: the fingerprint is not the plain SHA-256 that a guesser could compute, and two
// ledgers' keys give two fingerprints of one call.
func TestKeyed(t *testing.T) {
	canon := []byte(`{"card_number":"4242424242424242","order_id":"o-1"}`)
	fp := testKey.Of("refunds.issue", canon)
	plain := Legacy("refunds.issue", canon)
	if fp[len(Prefix):] == plain[len(LegacyPrefix):] {
		t.Errorf("the keyed fingerprint %s is the plain SHA-256", fp)
	}
	other := mustKey([]byte("fedcba9876543210fedcba9876543210"))
	if got := other.Of("refunds.issue", canon); got == fp {
		t.Errorf("two keys give one fingerprint %s", got)
	}
	if len(fp) != Len {
		t.Errorf("len(%s) = %d, want %d", fp, len(fp), Len)
	}
	if _, err := NewKey([]byte("short")); err == nil {
		t.Error("NewKey accepted a key of 5 bytes")
	}
}

// TestDownstreamKey: "dk_" and the first 32 hex digits of HMAC-SHA256(key, tenant NUL key)
// (docs/STATES.md), where the NUL keeps ("ab", "c") and ("a", "bc") apart.
func TestDownstreamKey(t *testing.T) {
	mac := hmac.New(sha256.New, testKeyRaw)
	mac.Write([]byte("acme\x00order-1:refund"))
	want := "dk_" + hex.EncodeToString(mac.Sum(nil))[:32]
	if got := testKey.DownstreamKey("acme", "order-1:refund"); got != want {
		t.Errorf("DownstreamKey = %s, want %s", got, want)
	}
	if testKey.DownstreamKey("ab", "c") == testKey.DownstreamKey("a", "bc") {
		t.Error("tenant and key run together")
	}
	if testKey.DownstreamKey("acme", "k") == mustKey([]byte("fedcba9876543210fedcba9876543210")).DownstreamKey("acme", "k") {
		t.Error("two ledgers' keys derive one downstream key")
	}
}

func TestOfInvalidUTF8Tool(t *testing.T) {
	got := testKey.Of("a\xffb", []byte(`{}`))
	if want := testKey.Of("a\uFFFDb", []byte(`{}`)); got != want {
		t.Errorf("Of with invalid UTF-8 = %s, want the U+FFFD form %s", got, want)
	}
}

func TestFingerprintError(t *testing.T) {
	_, err := testKey.Fingerprint("t", []byte(`{"a":1,"a":2}`))
	if !errors.Is(err, ErrNotIJSON) {
		t.Errorf("err = %v, want ErrNotIJSON", err)
	}
}

// TestKeyedAllocations: the keyed fingerprint and the downstream key are on the path of every
// request; each allocates only the string it returns (race builds instrument more, so the
// count is checked without -race only).
func TestKeyedAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	canon := []byte(`{"amount":1999,"currency":"EUR","order_id":"o-1"}`)
	if n := testing.AllocsPerRun(200, func() { _ = testKey.Of("refunds.issue", canon) }); n > 1 {
		t.Errorf("Of allocates %.1f times per call, want 1", n)
	}
	if n := testing.AllocsPerRun(200, func() { _ = testKey.DownstreamKey("acme", "order-1:refund") }); n > 1 {
		t.Errorf("DownstreamKey allocates %.1f times per call, want 1", n)
	}
}
