package catalog

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Defaults applied by Load (docs/TOOLS.md).
const (
	DefaultMethod          = http.MethodPost
	DefaultTimeout         = 10 * time.Second
	MaxTimeout             = 5 * time.Minute
	DefaultReconcileMethod = http.MethodGet
	DefaultMaxAttempts     = 3
	AttemptsLimit          = 100
	DefaultInitialBackoff  = 100 * time.Millisecond
	DefaultMaxBackoff      = 5 * time.Second
	DefaultUnsentFor       = 10 * time.Minute
	DefaultApprovals       = 1
	MaxApprovals           = 10
	DefaultApprovalTTL     = 24 * time.Hour
	DefaultEscalateAfter   = time.Minute
	DefaultRetention       = 30 * 24 * time.Hour
)

var (
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

	httpMethods      = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	reconcileMethods = []string{http.MethodGet, http.MethodPost}

	// Headers idemgate sets itself on every downstream request; a key header must not clash.
	reservedHeaders = []string{"Host", "Content-Type", "Content-Length", "Transfer-Encoding",
		"Connection", "X-Idemgate-Operation", "X-Idemgate-Downstream-Key", "X-Request-Id", "Traceparent", "Tracestate"}
)

// validateTool checks every field of raw, records problems in ec and returns the tool with
// defaults applied. The result is only meaningful when ec holds no errors.
func validateTool(raw *rawTool, ec *collector) *Tool {
	return validateCommon(raw, ec, func(t *Tool) {
		validateHTTP(t, raw.HTTP, ec)
		validateReconcile(t, raw.Reconcile, ec)
	})
}

// validateCommon checks what every tool has, whatever it calls: call checks how it is called
// (an HTTP request, or an MCP server's tool) and its reconcile.
func validateCommon(raw *rawTool, ec *collector, call func(*Tool)) *Tool {
	t := &Tool{Name: raw.Name, Description: strings.TrimSpace(raw.Description)}
	switch {
	case raw.Name == "":
		ec.addf("name", "required")
	case !nameRE.MatchString(raw.Name):
		ec.addf("name", "invalid name %q: want %s", raw.Name, nameRE)
	}
	if t.Description == "" {
		ec.addf("description", "required")
	}
	switch e := Effect(raw.Effect); e {
	case EffectRead, EffectIdempotent, EffectWrite:
		t.Effect = e
	case "":
		ec.addf("effect", "required (read, idempotent or write)")
	default:
		ec.addf("effect", "invalid effect %q: want read, idempotent or write", raw.Effect)
	}
	if ps := compileParamsSchema(raw.Name, raw.ParamsSchema, ec); ps != nil {
		t.ParamsSchemaRaw, t.Schema, t.nulls, t.strict = ps.raw, ps.schema, ps.nulls, ps.strict
	}
	for i, p := range raw.SensitiveParams {
		ptr, err := sensitivePointer(p.Name)
		if err != nil {
			ec.add(fmt.Sprintf("sensitive_params[%d]", i), err)
			continue
		}
		form, err := revealForm(p.Reveal)
		if err != nil {
			ec.add(fmt.Sprintf("sensitive_params[%d].reveal", i), err)
			continue
		}
		if !slices.Contains(t.SensitiveParams, ptr) {
			t.SensitiveParams = append(t.SensitiveParams, ptr)
		}
		if form != RevealNone {
			if t.reveal == nil {
				t.reveal = map[string]string{}
			}
			t.reveal[ptr] = form
		}
	}
	call(t)
	validateRetry(t, raw.Retry, ec)
	validateReview(t, raw.Review, ec)
	validateCompensation(t, raw.Compensation, ec)
	t.Retention = duration(ec, "retention", raw.Retention, DefaultRetention, positive)
	validateConsole(t, raw, ec)
	checkServable(t, ec)
	return t
}

// checkAbsoluteURL accepts an absolute http or https URL without credentials in it.
func checkAbsoluteURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("invalid URL %q: want an absolute http or https URL", raw)
	case u.User != nil:
		return fmt.Errorf("invalid URL %q: credentials in the URL are not allowed; use a connection", raw)
	}
	return nil
}

func validateHTTP(t *Tool, raw *rawHTTP, ec *collector) {
	if raw == nil {
		ec.addf("http", "required")
		return
	}
	t.HTTP.Method = method(ec, "http.method", raw.Method, DefaultMethod, httpMethods)
	t.HTTP.Connection = ec.connection("http.connection", raw.Connection)
	if raw.URL == "" {
		ec.addf("http.url", "required")
	} else if src, err := joinBase(t.HTTP.Connection, raw.URL, raw.Connection); err != nil {
		ec.add("http.url", err)
	} else if src == "" {
		// the connection's own problems say why
	} else if tmpl, err := parseURLTemplate(src); err != nil {
		ec.add("http.url", err)
	} else {
		t.HTTP.URL, t.urlTmpl = src, tmpl
	}
	validateShape(t, raw, ec)
	t.HTTP.Timeout = duration(ec, "http.timeout", raw.Timeout, DefaultTimeout, func(d time.Duration) error {
		if d <= 0 || d > MaxTimeout {
			return fmt.Errorf("must be more than 0 and at most %s", MaxTimeout)
		}
		return nil
	})
	if h := raw.IdempotencyHeader; h != "" {
		switch {
		case !isToken(h):
			ec.addf("http.idempotency_header", "invalid header name %q", h)
		case slices.Contains(reservedHeaders, http.CanonicalHeaderKey(h)):
			ec.addf("http.idempotency_header", "%q is set by idemgate itself", h)
		default:
			t.HTTP.IdempotencyHeader = h
		}
	}
	if p := raw.ResultReference; p != "" {
		if _, err := parsePointer(p); err != nil {
			ec.addf("http.result_reference", "invalid JSON pointer %q: %v", p, err)
		} else {
			t.HTTP.ResultReference = p
		}
	}
}

func validateReconcile(t *Tool, raw *rawReconcile, ec *collector) {
	if raw == nil {
		return
	}
	r := &ReconcileSpec{Method: method(ec, "reconcile.method", raw.Method, DefaultReconcileMethod, reconcileMethods),
		Connection: t.HTTP.Connection}
	named := raw.Connection
	if named != "" {
		r.Connection = ec.connection("reconcile.connection", named)
	} else if t.HTTP.Connection != nil {
		named = t.HTTP.Connection.Name
	}
	if raw.URL == "" {
		ec.addf("reconcile.url", "required")
	} else if src, err := joinBase(r.Connection, raw.URL, named); err != nil {
		ec.add("reconcile.url", err)
	} else if src == "" {
		// the connection's own problems say why
	} else if tmpl, err := parseURLTemplate(src); err != nil {
		ec.add("reconcile.url", err)
	} else {
		r.URL, t.reconcileTmpl = src, tmpl
	}
	r.Found = foundPointer(raw.Found, ec)
	r.Settle = duration(ec, "reconcile.settle", raw.Settle, 0, nonNegative)
	t.Reconcile = r
}

// foundPointer checks reconcile.found: "" for none, else a JSON pointer.
func foundPointer(p string, ec *collector) string {
	if p == "" {
		return ""
	}
	if _, err := parsePointer(p); err != nil {
		ec.addf("reconcile.found", "invalid JSON pointer %q: %v", p, err)
		return ""
	}
	return p
}

func validateRetry(t *Tool, raw *rawRetry, ec *collector) {
	if raw == nil {
		raw = &rawRetry{}
	}
	t.Retry.MaxAttempts = intInRange(ec, "retry.max_attempts", raw.MaxAttempts, DefaultMaxAttempts, 1, AttemptsLimit)
	t.Retry.InitialBackoff = duration(ec, "retry.initial_backoff", raw.InitialBackoff, DefaultInitialBackoff, positive)
	t.Retry.MaxBackoff = duration(ec, "retry.max_backoff", raw.MaxBackoff, DefaultMaxBackoff, positive)
	t.Retry.UnsentFor = duration(ec, "retry.unsent_for", raw.UnsentFor, DefaultUnsentFor, nonNegative)
	if t.Retry.InitialBackoff > 0 && t.Retry.MaxBackoff > 0 && t.Retry.InitialBackoff > t.Retry.MaxBackoff {
		ec.addf("retry.initial_backoff", "%s is more than max_backoff %s", t.Retry.InitialBackoff, t.Retry.MaxBackoff)
	}
}

func validateReview(t *Tool, raw *rawReview, ec *collector) {
	if raw == nil {
		raw = &rawReview{}
	}
	t.Review.RequireApproval = raw.RequireApproval
	t.Review.Approvals = intInRange(ec, "review.approvals", raw.Approvals, DefaultApprovals, 1, MaxApprovals)
	t.Review.ApprovalTTL = duration(ec, "review.approval_ttl", raw.ApprovalTTL, DefaultApprovalTTL, positive)
	t.Review.EscalateAfter = duration(ec, "review.escalate_after", raw.EscalateAfter, DefaultEscalateAfter, nonNegative)
	t.Review.LookalikeWindow = duration(ec, "review.lookalike_window", raw.LookalikeWindow, DefaultLookalikeWindow, positive)
	if raw.LookalikeOn != nil && len(raw.LookalikeOn) == 0 {
		ec.addf("review.lookalike_on", "empty: name the params that make two calls look alike, or leave it out for every param")
	}
	for i, p := range raw.LookalikeOn {
		ptr, err := sensitivePointer(p) // the same spelling: a top-level name or a JSON pointer
		if err != nil {
			ec.add(fmt.Sprintf("review.lookalike_on[%d]", i), err)
			continue
		}
		if !slices.Contains(t.Review.LookalikeOn, ptr) {
			t.Review.LookalikeOn = append(t.Review.LookalikeOn, ptr)
		}
	}
}

func validateCompensation(t *Tool, raw *rawCompensation, ec *collector) {
	if raw == nil {
		return
	}
	c := &CompensationSpec{Tool: raw.Tool}
	if raw.Tool == "" {
		ec.addf("compensation.tool", "required")
	}
	// The target's existence is checked by link, once every tool is known.
	params, err := toJSONValue(raw.Params)
	if err != nil {
		ec.add("compensation.params", err)
		return
	}
	switch p := params.(type) {
	case nil:
		c.Params = map[string]any{}
	case map[string]any:
		c.Params = p
	default:
		ec.addf("compensation.params", "expected a mapping")
		return
	}
	tmpl, err := parseParamsTemplate(c.Params)
	if err != nil {
		var pe *pathError
		if errors.As(err, &pe) {
			ec.add(joinPath("compensation.params", pe.path), pe.err)
		} else {
			ec.add("compensation.params", err)
		}
		return
	}
	t.Compensation, t.compTmpl = c, tmpl
}

func method(ec *collector, field, raw, def string, allowed []string) string {
	if raw == "" {
		return def
	}
	if !slices.Contains(allowed, raw) {
		ec.addf(field, "invalid method %q: want one of %s", raw, strings.Join(allowed, ", "))
		return def
	}
	return raw
}

func duration(ec *collector, field, raw string, def time.Duration, check func(time.Duration) error) time.Duration {
	if raw == "" {
		return def
	}
	d, err := time.ParseDuration(raw)
	if err != nil {
		ec.addf(field, "invalid duration %q", raw)
		return def
	}
	if err := check(d); err != nil {
		ec.addf(field, "invalid duration %q: %v", raw, err)
		return def
	}
	return d
}

func positive(d time.Duration) error {
	if d <= 0 {
		return errors.New("must be more than 0")
	}
	return nil
}

func nonNegative(d time.Duration) error {
	if d < 0 {
		return errors.New("must not be negative")
	}
	return nil
}

func intInRange(ec *collector, field string, raw *int, def, lo, hi int) int {
	if raw == nil {
		return def
	}
	if *raw < lo || *raw > hi {
		ec.addf(field, "%d out of range %d..%d", *raw, lo, hi)
		return def
	}
	return *raw
}

// sensitivePointer normalises a sensitive_params entry: a top-level name becomes "/name", a
// string starting with "/" must be a valid JSON pointer.
func sensitivePointer(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty entry")
	}
	if !strings.HasPrefix(s, "/") {
		return "/" + escapeToken(s), nil
	}
	if _, err := parsePointer(s); err != nil {
		return "", fmt.Errorf("invalid JSON pointer %q: %w", s, err)
	}
	return s, nil
}

// isToken reports whether s is an RFC 9110 token, the syntax of a header field name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
