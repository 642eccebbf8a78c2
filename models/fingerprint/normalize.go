package fingerprint

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects Normalize accepts:
// a value may sit inside at most MaxDepth arrays and objects.
const MaxDepth = 64

// ErrNotIJSON is the error every Normalize failure wraps, whether the input
// is not JSON at all or is JSON outside the accepted I-JSON subset. Test for
// it with errors.Is; errors.As with *Error gives the details.
var ErrNotIJSON = errors.New("not I-JSON")

// Error describes why Normalize rejected its input. It wraps ErrNotIJSON.
type Error struct {
	// Pointer is the RFC 6901 JSON pointer of the offending value, or of
	// the member name for a duplicate member; "" is the whole document.
	// Callers that embed the document under a member (such as "params")
	// prefix it with that member's pointer.
	Pointer string
	// Offset is the byte offset in the input at which the problem was found.
	Offset int
	// Reason says what is wrong, for people.
	Reason string
}

// Error returns "not I-JSON at <pointer>: <reason>", or "not I-JSON:
// <reason>" when the problem concerns the whole document.
func (e *Error) Error() string {
	if e.Pointer == "" {
		return "not I-JSON: " + e.Reason
	}
	return "not I-JSON at " + printable(e.Pointer, 128) + ": " + e.Reason
}

// Unwrap returns ErrNotIJSON.
func (e *Error) Unwrap() error { return ErrNotIJSON }

// Normalize checks that raw is exactly one JSON value in the I-JSON subset
// that can be fingerprinted and returns its RFC 8785 (JCS) canonical form.
//
// Insignificant whitespace around the value is allowed; anything else after
// it is not. The value may be of any JSON type. Normalize rejects, with an
// error wrapping ErrNotIJSON:
//
//   - malformed JSON, including a byte order mark;
//   - invalid UTF-8 anywhere, and \u escapes of unpaired surrogates such as
//     "\ud800";
//   - an object with two members of the same name, compared after escapes
//     are decoded ("a" and "\u0061" are the same name);
//   - a number whose decimal value differs from the value of the shortest
//     decimal that identifies its IEEE-754 double, which is what JCS
//     writes: 12345678901234567891, 0.30000000000000000001 and
//     9007199254740993 are rejected because the double cannot tell them
//     from a neighbour, 1e400 because it has no double, 1e-400 because it
//     would become 0;
//   - nesting deeper than MaxDepth.
//
// Numbers are otherwise written as ECMAScript writes doubles, so 10, 10.0,
// 1e1 and 100e-1 are all 10. The rule is about decimals, not binary: 0.1 is
// accepted, because 0.1 is the shortest decimal of the double nearest to it,
// while 0.1000000000000000055511151231257827 (closer to that double's exact
// binary value) is rejected, because it would be written 0.1 and so could not
// be told from 0.1. Every encoder that writes the shortest round-trip decimal
// (JavaScript, Python, Go, Java 19 and later) produces only accepted numbers;
// one that always writes 17 significant digits (printf %.17g) does not, for
// some values. Negative zero is accepted and written 0, as JCS requires: -0
// and 0 are the same value, so params that differ only there have the same
// fingerprint.
//
// Noncharacters such as U+FFFF, which RFC 7493 also excludes, are accepted:
// they are valid Unicode scalar values, JCS writes them unambiguously, and
// rejecting them would refuse requests without making fingerprints any more
// precise.
//
// The result is a new slice owned by the caller.
func Normalize(raw []byte) ([]byte, error) {
	p := parserPool.Get().(*parser)
	defer p.release()
	p.in = raw
	if err := p.value(); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(p.in) {
		return nil, p.fail("unexpected " + describe(p.in[p.pos:]) + " after the JSON value")
	}
	return slices.Clone(p.out), nil
}

// parser is the state of one Normalize call. It is pooled, so its buffers
// are reused from call to call.
type parser struct {
	in  []byte
	pos int
	// out receives the canonical text as the input is parsed. The members
	// of an object are written in input order and put in JCS order when
	// the object closes.
	out []byte
	// keys holds the decoded member names of the objects being parsed,
	// innermost last.
	keys []byte
	// members holds the members of the objects being parsed, innermost
	// last.
	members []member
	// tmp is scratch space for reordering members.
	tmp []byte
	// path describes the containers enclosing the current position,
	// outermost first; only path[:depth] is meaningful.
	path  [MaxDepth]frame
	depth int
}

// frame is one open array or object.
type frame struct {
	object bool
	// index is the index of the current element of an array.
	index int
	// hasKey reports whether the current member of an object has a name
	// yet; keyStart and keyEnd locate it in parser.keys.
	hasKey           bool
	keyStart, keyEnd int
}

// member is one member of an object being parsed.
type member struct {
	// keyStart and keyEnd locate the decoded name in parser.keys.
	keyStart, keyEnd int
	// start and end locate its canonical text, name:value, in parser.out.
	start, end int
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

// maxPooledBuffer is the largest buffer a parser keeps across calls, so that
// one large request does not pin its memory in the pool.
const maxPooledBuffer = 64 << 10

func (p *parser) release() {
	if cap(p.out) > maxPooledBuffer || cap(p.keys) > maxPooledBuffer ||
		cap(p.tmp) > maxPooledBuffer || cap(p.members) > maxPooledBuffer/32 {
		return
	}
	p.in = nil
	p.pos = 0
	p.out = p.out[:0]
	p.keys = p.keys[:0]
	p.members = p.members[:0]
	p.tmp = p.tmp[:0]
	p.depth = 0
	parserPool.Put(p)
}

// fail returns an *Error for the current position.
func (p *parser) fail(reason string) error {
	return &Error{Pointer: p.pointer(), Offset: p.pos, Reason: reason}
}

// pointer returns the JSON pointer of the current position.
func (p *parser) pointer() string {
	var b strings.Builder
	for i := range p.depth {
		f := &p.path[i]
		if !f.object {
			b.WriteByte('/')
			b.WriteString(strconv.Itoa(f.index))
			continue
		}
		if !f.hasKey {
			break
		}
		b.WriteByte('/')
		for _, c := range p.keys[f.keyStart:f.keyEnd] {
			switch c {
			case '~':
				b.WriteString("~0")
			case '/':
				b.WriteString("~1")
			default:
				b.WriteByte(c)
			}
		}
	}
	return b.String()
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses one value, preceded by optional whitespace.
func (p *parser) value() error {
	p.skipSpace()
	if p.pos >= len(p.in) {
		return p.fail("unexpected end of input, expected a value")
	}
	switch c := p.in[p.pos]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		p.pos++
		return p.string(false)
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	default:
		if c == '-' || isDigit(c) {
			return p.number()
		}
		return p.fail("unexpected " + describe(p.in[p.pos:]) + ", expected a value")
	}
}

func (p *parser) literal(lit string) error {
	if len(p.in)-p.pos < len(lit) || string(p.in[p.pos:p.pos+len(lit)]) != lit {
		return p.fail("unexpected " + describe(p.in[p.pos:]) + ", expected a value")
	}
	p.pos += len(lit)
	p.out = append(p.out, lit...)
	return nil
}

func (p *parser) open() (*frame, error) {
	if p.depth == MaxDepth {
		return nil, p.fail("nesting deeper than " + strconv.Itoa(MaxDepth) + " levels")
	}
	f := &p.path[p.depth]
	*f = frame{}
	p.depth++
	p.pos++
	return f, nil
}

func (p *parser) array() error {
	f, err := p.open()
	if err != nil {
		return err
	}
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		p.depth--
		return nil
	}
	for {
		if err := p.value(); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return p.fail("unexpected end of input, expected ',' or ']'")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
			f.index++
			continue
		case ']':
			p.pos++
			p.out = append(p.out, ']')
			p.depth--
			return nil
		}
		return p.fail("unexpected " + describe(p.in[p.pos:]) + ", expected ',' or ']'")
	}
}

func (p *parser) object() error {
	f, err := p.open()
	if err != nil {
		return err
	}
	f.object = true
	p.out = append(p.out, '{')
	bodyStart := len(p.out)
	keyBase := len(p.keys)
	memberBase := len(p.members)

	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '}')
		p.depth--
		return nil
	}
	for {
		f.hasKey = false
		p.skipSpace()
		if p.pos >= len(p.in) {
			return p.fail("unexpected end of input, expected a member name")
		}
		if p.in[p.pos] != '"' {
			return p.fail("unexpected " + describe(p.in[p.pos:]) + ", expected a member name")
		}
		p.pos++
		keyStart, start := len(p.keys), len(p.out)
		if err := p.string(true); err != nil {
			return err
		}
		f.hasKey, f.keyStart, f.keyEnd = true, keyStart, len(p.keys)
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			if p.pos >= len(p.in) {
				return p.fail("unexpected end of input, expected ':'")
			}
			return p.fail("unexpected " + describe(p.in[p.pos:]) + ", expected ':'")
		}
		p.pos++
		p.out = append(p.out, ':')
		if err := p.value(); err != nil {
			return err
		}
		p.members = append(p.members, member{keyStart: keyStart, keyEnd: len(p.keys), start: start, end: len(p.out)})
		p.skipSpace()
		if p.pos >= len(p.in) {
			return p.fail("unexpected end of input, expected ',' or '}'")
		}
		if c := p.in[p.pos]; c == ',' {
			p.pos++
			p.out = append(p.out, ',')
			continue
		} else if c != '}' {
			return p.fail("unexpected " + describe(p.in[p.pos:]) + ", expected ',' or '}'")
		}
		p.pos++
		break
	}

	if ms := p.members[memberBase:]; len(ms) > 1 {
		byName := func(a, b member) int {
			return compareNames(p.keys[a.keyStart:a.keyEnd], p.keys[b.keyStart:b.keyEnd])
		}
		sorted := slices.IsSortedFunc(ms, byName)
		if !sorted {
			slices.SortFunc(ms, byName)
		}
		for i := 1; i < len(ms); i++ {
			if byName(ms[i-1], ms[i]) == 0 {
				f.hasKey, f.keyStart, f.keyEnd = true, ms[i].keyStart, ms[i].keyEnd
				return p.fail("duplicate member name " + strconv.Quote(truncate(string(p.keys[ms[i].keyStart:ms[i].keyEnd]), 64)))
			}
		}
		if !sorted {
			// The body keeps its length: the same members and the
			// same number of commas, in another order.
			p.tmp = append(p.tmp[:0], p.out[bodyStart:]...)
			p.out = p.out[:bodyStart]
			for i, m := range ms {
				if i > 0 {
					p.out = append(p.out, ',')
				}
				p.out = append(p.out, p.tmp[m.start-bodyStart:m.end-bodyStart]...)
			}
		}
	}
	p.out = append(p.out, '}')
	p.keys = p.keys[:keyBase]
	p.members = p.members[:memberBase]
	p.depth--
	return nil
}

// compareNames orders decoded member names as JCS does: by their UTF-16 code
// units. That is byte order for UTF-8 except that characters above U+FFFF
// (surrogate pairs in UTF-16) sort before U+E000 to U+FFFF.
func compareNames(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return cmp.Compare(a[i], b[i])
	}
	// a[:i] == b[:i], so the characters that differ start at the same
	// offset in both.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	if ua, ub := firstUTF16(ra), firstUTF16(rb); ua != ub {
		return cmp.Compare(ua, ub)
	}
	return cmp.Compare(ra, rb)
}

// firstUTF16 returns the first UTF-16 code unit of r.
func firstUTF16(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

// string parses a string whose opening quote has been consumed and appends
// its canonical form to p.out and, for a member name, its decoded form to
// p.keys.
func (p *parser) string(name bool) error {
	in := p.in
	i := p.pos
	p.out = append(p.out, '"')
	for {
		start := i
		for i < len(in) {
			c := in[i]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			i++
		}
		p.out = append(p.out, in[start:i]...)
		if name {
			p.keys = append(p.keys, in[start:i]...)
		}
		if i >= len(in) {
			p.pos = i
			return p.fail("unexpected end of input in a string")
		}
		switch c := in[i]; {
		case c == '"':
			p.out = append(p.out, '"')
			p.pos = i + 1
			return nil
		case c == '\\':
			r, n, reason := unescape(in[i:])
			if reason != "" {
				p.pos = i
				return p.fail(reason)
			}
			p.out = appendRune(p.out, r)
			if name {
				p.keys = utf8.AppendRune(p.keys, r)
			}
			i += n
		case c < 0x20:
			p.pos = i
			return p.fail("control character U+00" + strconv.FormatUint(uint64(c)>>4, 16) +
				strconv.FormatUint(uint64(c)&0xF, 16) + " in a string must be escaped")
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				p.pos = i
				return p.fail("invalid UTF-8 in a string")
			}
			p.out = append(p.out, in[i:i+size]...)
			if name {
				p.keys = append(p.keys, in[i:i+size]...)
			}
			i += size
		}
	}
}

// unescape decodes the escape sequence at the start of s, which begins with a
// backslash. It returns the character, the length of the sequence, and a
// reason if the sequence is invalid.
func unescape(s []byte) (r rune, n int, reason string) {
	if len(s) < 2 {
		return 0, 0, "unexpected end of input in a string"
	}
	switch s[1] {
	case '"', '\\', '/':
		return rune(s[1]), 2, ""
	case 'b':
		return '\b', 2, ""
	case 'f':
		return '\f', 2, ""
	case 'n':
		return '\n', 2, ""
	case 'r':
		return '\r', 2, ""
	case 't':
		return '\t', 2, ""
	case 'u':
	default:
		return 0, 0, "invalid escape " + strconv.Quote(string(s[:2])) + " in a string"
	}
	hi, ok := hex4(s[2:])
	if !ok {
		return 0, 0, "invalid \\u escape in a string"
	}
	if hi < 0xD800 || hi > 0xDFFF {
		return hi, 6, ""
	}
	if hi <= 0xDBFF && len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
		if lo, ok := hex4(s[8:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
			return 0x10000 + (hi-0xD800)<<10 + (lo - 0xDC00), 12, ""
		}
	}
	return 0, 0, "unpaired surrogate \\u" + strings.ToLower(string(s[2:6])) + " in a string"
}

// hex4 decodes four hex digits at the start of s.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// maxDigits is the most significant digits the shortest decimal of a double
// can have.
const maxDigits = 17

// number parses a number and appends its canonical form to p.out.
func (p *parser) number() error {
	in := p.in
	start := p.pos
	i := start
	neg := i < len(in) && in[i] == '-'
	if neg {
		i++
	}
	intStart := i
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && '1' <= in[i] && in[i] <= '9':
		for i < len(in) && isDigit(in[i]) {
			i++
		}
	default:
		p.pos = i
		return p.fail("invalid number: expected a digit")
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(in) && in[i] == '.' {
		i++
		fracStart = i
		for i < len(in) && isDigit(in[i]) {
			i++
		}
		fracEnd = i
		if fracStart == fracEnd {
			p.pos = i
			return p.fail("invalid number: expected a digit after '.'")
		}
	}
	var exp int64
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		expNeg := false
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			expNeg = in[i] == '-'
			i++
		}
		expStart := i
		for i < len(in) && isDigit(in[i]) {
			if exp < 1e12 { // saturate: far beyond any double either way
				exp = exp*10 + int64(in[i]-'0')
			}
			i++
		}
		if i == expStart {
			p.pos = i
			return p.fail("invalid number: expected a digit in the exponent")
		}
		if expNeg {
			exp = -exp
		}
	}
	lit := in[start:i]
	p.pos = start // errors below point at the start of the number

	// The significant digits d[0] d[1] ... d[k-1] (no leading or trailing
	// zeros) of the literal, which is ±d[0].d[1]...d[k-1] × 10^e.
	nInt, nFrac := intEnd-intStart, fracEnd-fracStart
	digit := func(j int) byte {
		if j < nInt {
			return in[intStart+j]
		}
		return in[fracStart+j-nInt]
	}
	first, last := -1, -1
	for j := range nInt + nFrac {
		if digit(j) != '0' {
			if first < 0 {
				first = j
			}
			last = j
		}
	}
	if first < 0 { // zero, including -0
		p.out = append(p.out, '0')
		p.pos = i
		return nil
	}
	k := last - first + 1
	e := exp + int64(nInt) - 1 - int64(first)
	if e > 308 { // beyond the largest double, 1.7976931348623157e308
		return p.fail(outOfRange(lit))
	}
	if k > maxDigits || e < -330 { // finer than any double can tell
		return p.fail(inexact(lit))
	}
	var d [maxDigits]byte
	for j := range k {
		d[j] = digit(first + j)
	}
	if !exactDouble(d[:k], e) {
		if f, _ := parseDecimal(d[:k], e); math.IsInf(f, 0) {
			return p.fail(outOfRange(lit))
		}
		return p.fail(inexact(lit))
	}

	if neg {
		p.out = append(p.out, '-')
	}
	p.out = appendES6(p.out, d[:k], int(e))
	p.pos = i
	return nil
}

// fastDigits is how many significant decimal digits always survive a trip
// through a double unchanged (DBL_DIG): two different decimals of at most
// this many digits in the normal range never round to the same double.
const fastDigits = 15

// exactDouble reports whether the decimal d[0].d[1]...d[k-1] × 10^e (d has
// no leading or trailing zeros, 1 <= k <= maxDigits) is the shortest decimal
// of the double nearest to it, that is, whether it survives the trip through
// a double unchanged.
func exactDouble(d []byte, e int64) bool {
	k := len(d)
	// With at most fastDigits digits the decimal is the only one of its
	// length or shorter that rounds to its double, so it is the shortest.
	if k <= fastDigits && -307 <= e && e <= 307 {
		return true
	}
	return exactDoubleSlow(d, e)
}

// exactDoubleSlow is exactDouble without the shortcut: it converts the
// decimal to a double and compares it with the double's shortest decimal.
func exactDoubleSlow(d []byte, e int64) bool {
	f, err := parseDecimal(d, e)
	if err != nil || f == 0 || math.IsInf(f, 0) {
		return false
	}
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	// s is d[.ddd]e±xx, with no trailing zeros after the first digit.
	k, i := 0, 0
	for ; i < len(s) && s[i] != 'e'; i++ {
		if s[i] == '.' {
			continue
		}
		if k >= len(d) || s[i] != d[k] {
			return false
		}
		k++
	}
	var se int64
	for _, c := range s[min(i+2, len(s)):] {
		se = se*10 + int64(c-'0')
	}
	if i+1 < len(s) && s[i+1] == '-' {
		se = -se
	}
	return k == len(d) && se == e
}

// parseDecimal converts d[0].d[1]...d[k-1] × 10^e, 1 <= k <= maxDigits and
// -330 <= e <= 308, to the nearest double. The text it parses is short
// enough to need no allocation.
func parseDecimal(d []byte, e int64) (float64, error) {
	var buf [40]byte
	b := append(buf[:0], d...)
	b = append(b, 'e')
	b = strconv.AppendInt(b, e-int64(len(d)-1), 10)
	return strconv.ParseFloat(string(b), 64)
}

// appendES6 appends the number d[0].d[1]...d[k-1] × 10^e (d has no leading
// or trailing zeros) as ECMAScript's Number::toString writes it.
func appendES6(dst, d []byte, e int) []byte {
	k := len(d)
	n := e + 1 // the number is 0.d × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, d...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if e >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(e), 10)
	}
	return dst
}

func inexact(lit []byte) string {
	return "number " + printable(string(lit), 40) + " cannot be represented exactly; send it as a string"
}

func outOfRange(lit []byte) string {
	return "number " + printable(string(lit), 40) + " is out of the range of a double; send it as a string"
}

// describe names the input at the start of s for an error message.
func describe(s []byte) string {
	if len(s) == 0 {
		return "end of input"
	}
	r, size := utf8.DecodeRune(s)
	if r == utf8.RuneError && size == 1 {
		return "byte 0x" + strconv.FormatUint(uint64(s[0]), 16)
	}
	return strconv.QuoteRune(r)
}

// printable shortens s with truncate and escapes it as a Go string literal
// would (without the quotes) if it contains anything but printable ASCII, so
// that error messages stay short and safe to log.
func printable(s string, max int) string {
	s = truncate(s, max)
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7F {
			q := strconv.Quote(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}

// truncate shortens s to at most about max bytes, without splitting a
// character, and marks the cut with "…".
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for range utf8.UTFMax - 1 {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s + "…"
}
