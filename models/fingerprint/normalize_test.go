package fingerprint

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// canonicalCases are inputs Normalize accepts, with their canonical form.
var canonicalCases = []struct{ in, want string }{
	{`{}`, `{}`},
	{`[]`, `[]`},
	{` { } `, `{}`},
	{"\t[ ]\r\n", `[]`},
	{`null`, `null`},
	{`true`, `true`},
	{`false`, `false`},
	{` 42 `, `42`},
	{`"x"`, `"x"`},
	{`{"b":2,"a":1}`, `{"a":1,"b":2}`},
	{"{\n  \"b\" : [ 1 , 2 ] ,\n  \"a\" : { \"d\" : 4 , \"c\" : 3 }\n}", `{"a":{"c":3,"d":4},"b":[1,2]}`},
	{`[3,1,2]`, `[3,1,2]`},
	{`{"c":{"z":1,"y":{"q":1,"p":2}},"b":[{"y":1,"x":2}],"a":0}`, `{"a":0,"b":[{"x":2,"y":1}],"c":{"y":{"p":2,"q":1},"z":1}}`},

	// Numbers, written as ECMAScript writes doubles.
	{`10`, `10`},
	{`10.0`, `10`},
	{`1e1`, `10`},
	{`1E1`, `10`},
	{`1e+1`, `10`},
	{`100e-1`, `10`},
	{`0.01e3`, `10`},
	{`0`, `0`},
	{`-0`, `0`},
	{`-0.0`, `0`},
	{`0e-999999999999999999999`, `0`},
	{`-0.000e5`, `0`},
	{`0.1`, `0.1`},
	{`-1.5`, `-1.5`},
	{`0.000001`, `0.000001`},
	{`1e-6`, `0.000001`},
	{`1e-7`, `1e-7`},
	{`1.23e-7`, `1.23e-7`},
	{`123e-9`, `1.23e-7`},
	{`1e20`, `100000000000000000000`},
	{`1e21`, `1e+21`},
	{`1.5e300`, `1.5e+300`},
	{`-1e-300`, `-1e-300`},
	{`4.50`, `4.5`},
	{`2e-3`, `0.002`},
	{`1E30`, `1e+30`},
	{`0.000000000000000000000000001`, `1e-27`},
	{`333333333.3333333`, `333333333.3333333`},
	{`9007199254740992`, `9007199254740992`},
	{`9007199254740991`, `9007199254740991`},
	{`-9007199254740991`, `-9007199254740991`},
	{`123456789012345680000`, `123456789012345680000`},
	{`5e-324`, `5e-324`},
	{`1.7976931348623157e308`, `1.7976931348623157e+308`},
	{`2.2250738585072014e-308`, `2.2250738585072014e-308`},
	{`0.30000000000000004`, `0.30000000000000004`},
	{`[1,1.0,1e0,0.1e1,10e-1]`, `[1,1,1,1,1]`},

	// Strings.
	{`"\u00e9"`, `"é"`},
	{`"é"`, `"é"`},
	{`"\u00E9"`, `"é"`},
	{`"\/"`, `"/"`},
	{`"\"\\\b\f\n\r\t"`, `"\"\\\b\f\n\r\t"`},
	{`"\u0000\u001f\u001F\u007f"`, "\"\\u0000\\u001f\\u001f\x7f\""},
	{`"\u0041\u2028"`, "\"A\u2028\""},
	{`"\ud83d\ude00"`, `"😀"`},
	{`"\uD83D\uDE00"`, `"😀"`},
	{`"\uffff\ufdd0"`, "\"\uffff\ufdd0\""},
	{`"<>&'"`, `"<>&'"`},

	// Member names are compared after decoding and sorted by UTF-16
	// code units: U+1F600 (a surrogate pair) sorts before U+FB33.
	{`{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
	{`{"דּ":1,"😀":2,"€":3,"\r":4,"1":5,"ö":6}`, `{"\r":4,"1":5,"ö":6,"€":3,"😀":2,"דּ":1}`},
	{`{"aa":1,"a":2,"":3}`, `{"":3,"a":2,"aa":1}`},

	// The example of RFC 8785 section 3.2.2, except that the RFC writes
	// the first number 333333333.33333329, which is not the shortest
	// decimal of its double and so is rejected (see TestNormalizeRejects).
	{`{
  "numbers": [333333333.3333333, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`, "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\"string\":\"€$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}"},
}

func TestNormalizeCanonical(t *testing.T) {
	for _, tc := range canonicalCases {
		got, err := Normalize([]byte(tc.in))
		if err != nil {
			t.Errorf("Normalize(%q): %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("Normalize(%q) = %s, want %s", tc.in, got, tc.want)
		}
		want, err := jcs.Transform([]byte(tc.in))
		if err != nil {
			t.Errorf("jcs.Transform(%q): %v", tc.in, err)
		} else if string(got) != string(want) {
			t.Errorf("Normalize(%q) = %s, jcs.Transform = %s", tc.in, got, want)
		}
		again, err := Normalize(got)
		if err != nil || string(again) != string(got) {
			t.Errorf("Normalize(%s) = %s, %v; want it unchanged", got, again, err)
		}
	}
}

func TestNormalizeRejects(t *testing.T) {
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	cases := []struct {
		in      string
		pointer string
		reason  string // substring of Error.Reason
	}{
		// Not one JSON value.
		{``, "", "end of input"},
		{`   `, "", "end of input"},
		{`1 2`, "", "after the JSON value"},
		{`{} {}`, "", "after the JSON value"},
		{`{}x`, "", "after the JSON value"},
		{`"a",`, "", "after the JSON value"},
		{"\xef\xbb\xbf{}", "", "expected a value"},
		{`{`, "", "end of input"},
		{`[`, "/0", "end of input"},
		{`[1`, "/0", "end of input"},
		{`{"a"`, "/a", "expected ':'"},
		{`{"a":}`, "/a", "expected a value"},
		{`{"a" 1}`, "/a", "expected ':'"},
		{`{"a":1,}`, "", "expected a member name"},
		{`{a:1}`, "", "expected a member name"},
		{`[1,]`, "/1", "expected a value"},
		{`[,1]`, "/0", "expected a value"},
		{`[1 2]`, "/0", "expected ',' or ']'"},
		{`{"a":1 "b":2}`, "/a", "expected ',' or '}'"},
		{`tru`, "", "expected a value"},
		{`nul`, "", "expected a value"},
		{`True`, "", "expected a value"},
		{`undefined`, "", "expected a value"},
		{`NaN`, "", "expected a value"},
		{`Infinity`, "", "expected a value"},
		{`'a'`, "", "expected a value"},
		{`"abc`, "", "end of input"},
		{`"\`, "", "end of input"},

		// Numbers outside the JSON grammar.
		{`01`, "", "after the JSON value"},
		{`-`, "", "expected a digit"},
		{`+1`, "", "expected a value"},
		{`.5`, "", "expected a value"},
		{`1.`, "", "after '.'"},
		{`1.e5`, "", "after '.'"},
		{`1e`, "", "exponent"},
		{`1e+`, "", "exponent"},
		{`0x10`, "", "after the JSON value"},
		{`1_000`, "", "after the JSON value"},
		{`- 1`, "", "expected a digit"},

		// Numbers a double cannot carry exactly.
		{`12345678901234567891`, "", "cannot be represented exactly; send it as a string"},
		{`{"amount":12345678901234567891}`, "/amount", "number 12345678901234567891 cannot be represented exactly; send it as a string"},
		{`0.30000000000000000001`, "", "cannot be represented exactly"},
		{`9007199254740993`, "", "cannot be represented exactly"},
		{`333333333.33333329`, "", "cannot be represented exactly"},
		{`0.1000000000000000055511151231257827021181583404541015625`, "", "cannot be represented exactly"},
		{`1.00000000000000000000000000000000000000000000000000001`, "", "cannot be represented exactly"},
		{`1e400`, "", "out of the range"},
		{`-1e400`, "", "out of the range"},
		{`1.8e308`, "", "out of the range"},
		{`1e999999999999999999999999`, "", "out of the range"},
		{`1e-400`, "", "cannot be represented exactly"},
		{`1e-999999999999999999999999`, "", "cannot be represented exactly"},
		{`3e-324`, "", "cannot be represented exactly"},
		{`[1,2,{"x":[0,1e400]}]`, "/2/x/1", "out of the range"},

		// Strings.
		{"\"\x01\"", "", "control character U+0001"},
		{"\"a\nb\"", "", "control character U+000a"},
		{"\"\x7f\xff\"", "", "invalid UTF-8"},
		{"\"\xc3\"", "", "invalid UTF-8"},
		{"\"\xc0\xaf\"", "", "invalid UTF-8"},         // overlong '/'
		{"\"\xed\xa0\x80\"", "", "invalid UTF-8"},     // a surrogate, encoded
		{"\"\xf4\x90\x80\x80\"", "", "invalid UTF-8"}, // beyond U+10FFFF
		{"{\"\xff\":1}", "", "invalid UTF-8"},
		{`"\ud800"`, "", `unpaired surrogate \ud800`},
		{`"\uDBFF"`, "", `unpaired surrogate \udbff`},
		{`"\udc00"`, "", "unpaired surrogate"},
		{`"\ud800\u0041"`, "", "unpaired surrogate"},
		{`"\ud800\ud800"`, "", "unpaired surrogate"},
		{`"\ude00\ud83d"`, "", "unpaired surrogate"},
		{`"\ud800x"`, "", "unpaired surrogate"},
		{`{"a":["\udfff"]}`, "/a/0", "unpaired surrogate"},
		{`"\x41"`, "", "invalid escape"},
		{`"\U0041"`, "", "invalid escape"},
		{`"\u004"`, "", `invalid \u escape`},
		{`"\u00g1"`, "", `invalid \u escape`},
		{`"\'"`, "", "invalid escape"},

		// Duplicate member names, compared after decoding.
		{`{"a":1,"a":1}`, "/a", `duplicate member name "a"`},
		{`{"a":1,"b":2,"a":3}`, "/a", "duplicate member name"},
		{`{"a":1,"\u0061":2}`, "/a", "duplicate member name"},
		{`{"é":1,"\u00e9":2}`, "/é", "duplicate member name"},
		{`{"x":{"y":[{"k/~":1,"k\/~":2}]}}`, "/x/y/0/k~1~0", "duplicate member name"},

		// Nesting.
		{deep(MaxDepth+1, "[", "]"), "/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0", "nesting deeper than 64 levels"},
		{strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), strings.Repeat("/a", MaxDepth), "nesting deeper than 64 levels"},
		{strings.Repeat("[", 100000), strings.Repeat("/0", MaxDepth), "nesting deeper"},
	}
	for _, tc := range cases {
		out, err := Normalize([]byte(tc.in))
		if err == nil {
			t.Errorf("Normalize(%q) = %s, want an error", truncate(tc.in, 80), out)
			continue
		}
		if !errors.Is(err, ErrNotIJSON) {
			t.Errorf("Normalize(%q): %v does not wrap ErrNotIJSON", truncate(tc.in, 80), err)
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Normalize(%q): %v is not an *Error", truncate(tc.in, 80), err)
			continue
		}
		if e.Pointer != tc.pointer {
			t.Errorf("Normalize(%q): pointer %q, want %q (%v)", truncate(tc.in, 80), e.Pointer, tc.pointer, err)
		}
		if !strings.Contains(e.Reason, tc.reason) {
			t.Errorf("Normalize(%q): reason %q, want it to contain %q", truncate(tc.in, 80), e.Reason, tc.reason)
		}
		if e.Offset < 0 || e.Offset > len(tc.in) {
			t.Errorf("Normalize(%q): offset %d outside the input", truncate(tc.in, 80), e.Offset)
		}
	}
}

func TestNormalizeDepthLimit(t *testing.T) {
	for _, open := range []string{"[", `{"k":`} {
		closer := "]"
		if open != "[" {
			closer = "}"
		}
		ok := strings.Repeat(open, MaxDepth) + "0" + strings.Repeat(closer, MaxDepth)
		if _, err := Normalize([]byte(ok)); err != nil {
			t.Errorf("depth %d: %v", MaxDepth, err)
		}
		tooDeep := strings.Repeat(open, MaxDepth+1) + "0" + strings.Repeat(closer, MaxDepth+1)
		if _, err := Normalize([]byte(tooDeep)); !errors.Is(err, ErrNotIJSON) {
			t.Errorf("depth %d: err = %v, want ErrNotIJSON", MaxDepth+1, err)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	_, err := Normalize([]byte(`{"amount":12345678901234567891}`))
	want := "not I-JSON at /amount: number 12345678901234567891 cannot be represented exactly; send it as a string"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	_, err = Normalize([]byte(`{"a\nb":1,"a\nb":2}`))
	if err == nil || strings.ContainsAny(err.Error(), "\n") {
		t.Errorf("err = %q, want one line", err)
	}
	long := `[` + strings.Repeat("9", 5000) + `]`
	_, err = Normalize([]byte(long))
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("err = %q, want a short message", err)
	}
}

// TestNumbersAgainstJCS checks the number path against jcs.NumberToJSON and
// the exactness rule against its definition, on many doubles.
func TestNumbersAgainstJCS(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(f float64) {
		t.Helper()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return
		}
		want, err := jcs.NumberToJSON(f)
		if err != nil {
			t.Fatalf("jcs.NumberToJSON(%v): %v", f, err)
		}
		// Every spelling of the shortest decimal is accepted and
		// written as JCS writes it.
		for _, lit := range []string{
			strconv.FormatFloat(f, 'e', -1, 64),
			strconv.FormatFloat(f, 'E', -1, 64),
			strconv.FormatFloat(f, 'f', -1, 64),
			strconv.FormatFloat(f, 'g', -1, 64),
			want,
		} {
			got, err := Normalize([]byte(lit))
			if err != nil {
				t.Fatalf("Normalize(%s) [%v]: %v", lit, f, err)
			}
			if string(got) != want {
				t.Fatalf("Normalize(%s) = %s, jcs.NumberToJSON = %s", lit, got, want)
			}
		}
		// A 17-digit spelling is accepted exactly when it is the
		// shortest one padded with zeros.
		lit17 := strconv.FormatFloat(f, 'e', 16, 64)
		got, err := Normalize([]byte(lit17))
		exact, ok := ratEqual(lit17, want)
		if !ok {
			t.Fatalf("cannot compare %s and %s", lit17, want)
		}
		if exact != (err == nil) {
			t.Fatalf("Normalize(%s) = %s, %v; exactly %s: %v", lit17, got, err, want, exact)
		}
	}
	specials := []float64{
		0, 1, -1, 0.1, 0.2, 0.3, 1.0 / 3, 2.0 / 3, 1e21, 1e-6, 1e-7, 9.999999999999999e20, 1e20,
		999999999999999999999, 0.000001, 0.0000011, 5e-324, math.MaxFloat64, math.SmallestNonzeroFloat64,
		2.2250738585072014e-308, 2.225073858507201e-308, 1 << 53, 1<<53 - 1, 295147905179352830000,
		4.4501477170144023e-308, 1.7976931348623157e308, 123456789, 1e308, 1e-308,
	}
	for _, f := range specials {
		check(f)
		check(-f)
	}
	for range 20000 {
		check(math.Float64frombits(rng.Uint64())) // any bit pattern
		check(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(60)-30)))
		check(float64(rng.Int64N(1<<53)) / math.Pow(10, float64(rng.IntN(25))))
	}
}

func ratEqual(a, b string) (bool, bool) {
	ra, ok1 := parseRat(a)
	rb, ok2 := parseRat(b)
	if !ok1 || !ok2 {
		return false, false
	}
	return ra.Cmp(rb) == 0, true
}

// TestExactDoubleShortcut checks the DBL_DIG shortcut of exactDouble against
// the full conversion on random decimals of up to 15 significant digits.
func TestExactDoubleShortcut(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(d []byte, e int64) {
		t.Helper()
		if !exactDoubleSlow(d, e) {
			t.Fatalf("%se%d: the shortcut accepts it, the full conversion does not", d, e)
		}
	}
	nines := []byte("999999999999999")
	for _, e := range []int64{-307, -306, -1, 0, 1, 306, 307} {
		for k := 1; k <= fastDigits; k++ {
			check(nines[:k], e)
			check(append([]byte("1"), append(make([]byte, 0, k), nines[:k-1]...)...), e)
		}
	}
	for range 200000 {
		k := 1 + rng.IntN(fastDigits)
		d := make([]byte, k)
		for i := range d {
			d[i] = byte('0' + rng.IntN(10))
		}
		d[0] = byte('1' + rng.IntN(9))
		d[k-1] = byte('1' + rng.IntN(9))
		e := int64(rng.IntN(615) - 307)
		if rng.IntN(4) == 0 {
			e = int64(rng.IntN(41) - 20)
		}
		check(d, e)
	}
}
