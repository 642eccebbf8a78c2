package fingerprint

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// fuzzSeeds are interesting inputs for the Normalize fuzz targets.
var fuzzSeeds = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `-0.0`, `1`, `10`, `10.0`, `1e1`, `1E+1`, `100e-1`,
	`0.1`, `0.30000000000000004`, `0.30000000000000000001`, `12345678901234567891`, `9007199254740993`,
	`1e400`, `-1e400`, `1e-400`, `5e-324`, `3e-324`, `1.7976931348623157e308`, `1e21`, `1e-7`, `123e-9`,
	`0e99999999999999999999`, `1e99999999999999999999`, `01`, `1.`, `.1`, `-`, `1e`, `+1`,
	`"abc"`, `"\u00e9"`, `"é"`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\u0000"`,
	`"\/\b\f\n\r\t\"\\"`, "\"\x01\"", "\"\xff\"", "\"\xed\xa0\x80\"", `"\x"`, `"\u12"`,
	`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"\ud83d\ude00":1,"\ufb33":2,"\u20ac":3}`,
	`{"a":{"c":[1,2,{"e":null,"d":true}],"b":"x"}}`, `[1,[2,[3,[4]]]]`, `{"a":1,}`, `[1,]`, `1 2`, " \t\n1\r\n",
	"\xef\xbb\xbf{}", strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
	strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	`{"customer_id":"cus_9f8e7d6c5b4a","amount":1999,"currency":"EUR","metadata":{"line_items":[{"sku":"SKU-1","qty":2,"price":9.99}]}}`,
}

// checkNormalized asserts what must hold whenever Normalize accepts in and
// returns out.
func checkNormalized(t *testing.T, in, out []byte) {
	t.Helper()
	if !utf8.Valid(out) || !json.Valid(out) {
		t.Fatalf("Normalize(%q) = %q, which is not valid JSON", in, out)
	}
	again, err := Normalize(out)
	if err != nil {
		t.Fatalf("Normalize(%q) = %q, which Normalize rejects: %v", in, out, err)
	}
	if !bytes.Equal(again, out) {
		t.Fatalf("Normalize is not idempotent: %q -> %q -> %q", in, out, again)
	}
	// The canonical form means the same as the input.
	if same, err := sameJSON(in, out); err != nil || !same {
		t.Fatalf("Normalize(%q) = %q, which means something else (err %v)", in, out, err)
	}
	// It is exactly what jcs produces.
	want, err := jcs.Transform(in)
	if err != nil {
		t.Fatalf("Normalize accepted %q, jcs.Transform rejects it: %v", in, err)
	}
	if !bytes.Equal(out, want) {
		t.Fatalf("Normalize(%q) = %q, jcs.Transform = %q", in, out, want)
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Normalize(in)
		if err != nil {
			if out != nil {
				t.Fatalf("Normalize(%q) returned output %q with error %v", in, out, err)
			}
			return
		}
		checkNormalized(t, in, out)
	})
}

// FuzzNormalizePair checks injectivity directly: two inputs share a
// canonical form exactly when they are the same JSON value.
func FuzzNormalizePair(f *testing.F) {
	pairs := [][2]string{
		{`10`, `1e1`}, {`10`, `10.0`}, {`0`, `-0`}, {`0.1`, `1e-1`},
		{`12345678901234567891`, `12345678901234567890`}, {`0.30000000000000000001`, `0.3`},
		{`9007199254740993`, `9007199254740992`},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`}, {`{"a":1,"a":2}`, `{"a":2}`},
		{`"\u00e9"`, `"é"`}, {`"\ud800"`, "\"\xef\xbf\xbd\""}, {"\"\xff\"", "\"\xef\xbf\xbd\""},
		{`"10"`, `10`}, {`[1,2]`, `[2,1]`}, {`{"a":null}`, `{}`},
		{`{"\ud83d\ude00":1,"\ufb33":2}`, `{"דּ":2,"😀":1}`},
	}
	for _, p := range pairs {
		f.Add([]byte(p[0]), []byte(p[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ca, errA := Normalize(a)
		cb, errB := Normalize(b)
		if errA != nil || errB != nil {
			return
		}
		same, err := sameJSON(a, b)
		if err != nil {
			t.Fatalf("comparing %q and %q: %v", a, b, err)
		}
		if equal := bytes.Equal(ca, cb); equal != same {
			t.Fatalf("Normalize(%q) = %q, Normalize(%q) = %q; canonical forms equal: %v, values equal: %v",
				a, ca, b, cb, equal, same)
		}
		if (testKey.Of("t", ca) == testKey.Of("t", cb)) != same {
			t.Fatalf("fingerprints of %q and %q disagree with their values", a, b)
		}
	})
}
