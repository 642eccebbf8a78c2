package headers

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParsePrefer(t *testing.T) {
	cases := []struct {
		values  []string
		wait    time.Duration
		applied string
	}{
		{nil, DefaultWait, ""},
		{[]string{}, DefaultWait, ""},
		{[]string{""}, DefaultWait, ""},
		{[]string{"wait=10"}, 10 * time.Second, "wait=10"},
		{[]string{"wait=5"}, 5 * time.Second, "wait=5"},
		{[]string{"wait=0"}, 0, "wait=0"},
		{[]string{"wait=60"}, 60 * time.Second, "wait=60"},
		{[]string{"wait=61"}, 60 * time.Second, "wait=60"},
		{[]string{"wait=3600"}, 60 * time.Second, "wait=60"},
		{[]string{"wait=99999999999999999999999999"}, 60 * time.Second, "wait=60"},
		{[]string{"wait=007"}, 7 * time.Second, "wait=7"},
		{[]string{`wait="5"`}, 5 * time.Second, "wait=5"},
		{[]string{"WAIT=5"}, 5 * time.Second, "wait=5"},
		{[]string{"Wait = 5"}, 5 * time.Second, "wait=5"},
		{[]string{"wait=5;foo=bar"}, 5 * time.Second, "wait=5"},
		{[]string{"wait=5 ; foo"}, 5 * time.Second, "wait=5"},
		{[]string{"  wait=5  "}, 5 * time.Second, "wait=5"},

		{[]string{"wait=-1"}, DefaultWait, ""},
		{[]string{"wait=+5"}, DefaultWait, ""},
		{[]string{"wait=1.5"}, DefaultWait, ""},
		{[]string{"wait=5s"}, DefaultWait, ""},
		{[]string{"wait=abc"}, DefaultWait, ""},
		{[]string{"wait="}, DefaultWait, ""},
		{[]string{`wait=""`}, DefaultWait, ""},
		{[]string{"wait"}, DefaultWait, ""},
		{[]string{"wait=5 6"}, DefaultWait, ""},
		{[]string{`wait="5`}, DefaultWait, ""},
		{[]string{"waiting=5"}, DefaultWait, ""},
		{[]string{"wait =5x"}, DefaultWait, ""},

		{[]string{"respond-async"}, 0, "respond-async"},
		{[]string{"Respond-Async"}, 0, "respond-async"},
		{[]string{"respond-async;x=1"}, 0, "respond-async"},
		{[]string{"respond-async, wait=30"}, 0, "respond-async"},
		{[]string{"wait=30, respond-async"}, 0, "respond-async"},
		{[]string{"wait=30", "respond-async"}, 0, "respond-async"},
		{[]string{"respond-async", "wait=abc"}, 0, "respond-async"},

		// Only the first occurrence of a preference counts (RFC 7240).
		{[]string{"wait=5, wait=20"}, 5 * time.Second, "wait=5"},
		{[]string{"wait=5", "wait=20"}, 5 * time.Second, "wait=5"},
		{[]string{"wait=x, wait=20"}, DefaultWait, ""},

		// Unknown and malformed preferences are ignored.
		{[]string{"return=minimal"}, DefaultWait, ""},
		{[]string{"return=minimal, wait=3"}, 3 * time.Second, "wait=3"},
		{[]string{"handling=lenient; x=\"a,b\", wait=4"}, 4 * time.Second, "wait=4"},
		{[]string{`foo="a, wait=1, b", wait=2`}, 2 * time.Second, "wait=2"},
		{[]string{`foo="a\", wait=1", wait=2`}, 2 * time.Second, "wait=2"},
		{[]string{",,, wait=8 ,,"}, 8 * time.Second, "wait=8"},
		{[]string{"@@@, wait=8"}, 8 * time.Second, "wait=8"},
		{[]string{"=5, wait=9"}, 9 * time.Second, "wait=9"},
		{[]string{"respond-async-not"}, DefaultWait, ""},
	}
	for _, tc := range cases {
		got := ParsePrefer(tc.values)
		if got.Wait != tc.wait || got.Applied != tc.applied {
			t.Errorf("ParsePrefer(%q) = %+v, want {Wait:%v Applied:%q}", tc.values, got, tc.wait, tc.applied)
		}
	}
}

func FuzzPrefer(f *testing.F) {
	seeds := []string{
		"", "wait=10", "wait=0", "wait=60", "wait=61", "wait=-1", "wait=99999999999999999999999", `wait="5"`,
		`wait="5`, "respond-async", "respond-async, wait=5", "WAIT = 7 ; a=b", `foo="a,\"b", wait=3`,
		"wait=5, wait=9", "return=minimal", ",;=\"\\", "wait=\x00", "wait=\xff",
	}
	for _, s := range seeds {
		f.Add(s, "")
	}
	f.Add("wait=1", "respond-async")
	f.Fuzz(func(t *testing.T, a, b string) {
		p := ParsePrefer([]string{a, b})
		if p.Wait < 0 || p.Wait > MaxWait {
			t.Fatalf("ParsePrefer(%q, %q).Wait = %v", a, b, p.Wait)
		}
		switch {
		case p.Applied == "":
			if p.Wait != DefaultWait {
				t.Fatalf("ParsePrefer(%q, %q) = %+v: no preference applied but not the default wait", a, b, p)
			}
		case p.Applied == "respond-async":
			if p.Wait != 0 {
				t.Fatalf("ParsePrefer(%q, %q) = %+v", a, b, p)
			}
		case strings.HasPrefix(p.Applied, "wait="):
			n, err := strconv.Atoi(strings.TrimPrefix(p.Applied, "wait="))
			if err != nil || time.Duration(n)*time.Second != p.Wait {
				t.Fatalf("ParsePrefer(%q, %q) = %+v: Applied does not match Wait", a, b, p)
			}
		default:
			t.Fatalf("ParsePrefer(%q, %q) = %+v: unexpected Applied", a, b, p)
		}
	})
}
