package downstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/jobs/catalog"
)

// encodeBody spells the call's params as its encoding says, with the downstream key written
// at its pointers. It returns the body (nil for none) and its content type.
func encodeBody(c Call) ([]byte, string, error) {
	if c.Body == nil || c.Encoding == catalog.BodyNone {
		return nil, "", nil
	}
	body := c.Body
	var doc map[string]any
	if len(c.KeyAt) > 0 || len(c.Omit) > 0 || c.Encoding == catalog.BodyForm {
		dec := json.NewDecoder(bytes.NewReader(c.Body))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return nil, "", fmt.Errorf("the params are not a JSON object: %w", err)
		}
		if doc == nil {
			doc = map[string]any{}
		}
		for _, name := range c.Omit {
			delete(doc, name)
		}
		for _, p := range c.KeyAt {
			if err := catalog.SetMember(doc, p, c.Key); err != nil {
				return nil, "", err
			}
		}
	}
	if c.Encoding == catalog.BodyForm {
		return []byte(EncodeForm(doc)), "application/x-www-form-urlencoded", nil
	}
	if doc != nil {
		// As encoding/json writes it, but without HTML escapes: the body says what the
		// params say, in the bytes an agent would expect.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(doc); err != nil {
			return nil, "", err
		}
		body = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	return body, "application/json", nil
}

// EncodeForm writes params as application/x-www-form-urlencoded, nested the way Stripe and
// Rails read it (docs/TOOLS.md): metadata[order]=1042, items[0][price]=p_1, tags[0]=a; booleans
// true/false; numbers as written; null members, empty objects and empty lists left out.
// Members are written in the order of their names, so one set of params is one body.
func EncodeForm(params map[string]any) string {
	var sb strings.Builder
	writeForm(&sb, "", params)
	return sb.String()
}

func writeForm(sb *strings.Builder, prefix string, v any) {
	switch x := v.(type) {
	case map[string]any:
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			writeForm(sb, formKey(prefix, k), x[k])
		}
	case []any:
		for i, e := range x {
			writeForm(sb, formKey(prefix, strconv.Itoa(i)), e)
		}
	case nil:
	default:
		if sb.Len() > 0 {
			sb.WriteByte('&')
		}
		sb.WriteString(prefix)
		sb.WriteByte('=')
		sb.WriteString(url.QueryEscape(scalar(x)))
	}
}

// formKey is name nested under prefix: "metadata" then "metadata[order]". The brackets are
// written as they are; what is inside them is escaped.
func formKey(prefix, name string) string {
	if prefix == "" {
		return url.QueryEscape(name)
	}
	return prefix + "[" + url.QueryEscape(name) + "]"
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}
