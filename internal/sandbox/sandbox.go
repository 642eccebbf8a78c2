// Package sandbox is idemgate's built-in downstream service: a small, real HTTP API for
// tickets, refunds and emails that the demo catalogue calls, and the fake downstream the test
// suites use to count the side effects that were actually committed.
//
// Its point is to make every failure class of docs/STATES.md happen on demand. Faults are queued over
// HTTP (PUT /_faults) or from Go (AddFault) and make the next matching requests slow, throttled,
// rejected, failed, or, most importantly, committed without the caller ever hearing about it.
//
// A Sandbox is an http.Handler whose paths are relative to its root, so the gateway can mount
// it under /sandbox/ with http.StripPrefix. Every method is safe for concurrent use.
package sandbox

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxBody bounds request bodies so a careless client cannot exhaust the demo server's memory.
const maxBody = 1 << 20

// maxRecorded bounds the request log by default: the sandbox may run for days inside a demo
// gateway, and most tests need only the most recent requests (RecordRequests changes it).
const maxRecorded = 10000

// RecordedHeaders are the request headers kept in each Request: the ones tests assert on to
// prove that retries reuse one downstream key and that tracing context arrived.
var RecordedHeaders = []string{"X-Request-Id", "X-Idemgate-Operation", "X-Idemgate-Downstream-Key", "Traceparent", "Idempotency-Key"}

// Request is one request the sandbox received, faulted or not.
type Request struct {
	Method string
	Path   string // relative to the sandbox root, as routed
	Query  string // the raw query string
	Header http.Header
	Body   []byte
	At     time.Time
	Fault  string // the fault mode applied to it, "" for none
}

// Sandbox is the fake downstream. The zero value is not usable; call New.
type Sandbox struct {
	// mu guards everything below. One lock is enough: every operation is an in-memory update,
	// and holding it across a commit is what makes concurrent duplicates of one idempotency
	// key wait for the first and then receive its stored answer.
	mu sync.Mutex

	requests []Request

	faults  []*activeFault
	applied int           // faults applied so far, for /_stats
	release chan struct{} // closed by ClearFaults to free requests held by hang faults
	// after, when set, replaces the real timer of delays and hangs (WithTimer).
	after func(time.Duration) <-chan time.Time

	tickets    []*ticket
	ticketKeys map[string]storedReply // Idempotency-Key → the answer first given for it
	closes     int
	refunds    []*refund
	emails     []*email

	nextTicket, nextRefund, nextEmail int
	// idStamp is written between a resource's letter and its number ("R-" + idStamp + "5001");
	// "" unless StampedIDs says.
	idStamp string
	// recorded bounds the request log (maxRecorded unless RecordRequests says).
	recorded int

	// persistPath is the file what the sandbox committed is kept in ("" for none: Load);
	// persistMu orders its writes.
	persistPath string
	persistMu   sync.Mutex
}

// Option configures a Sandbox.
type Option func(*Sandbox)

// WithTimer makes delays and hangs end when the channel after(d) delivers, instead of after d
// of real time: a test then decides when a delay is over, and knows when one has begun,
// without sleeping.
func WithTimer(after func(d time.Duration) <-chan time.Time) Option {
	return func(s *Sandbox) { s.after = after }
}

// RecordRequests keeps the most recent n requests in the log Requests reads, instead of
// 10000: a test that counts effects from the log over a longer run (the 10,000-operation fault
// run sends several requests per operation) must see all of them.
func RecordRequests(n int) Option {
	return func(s *Sandbox) { s.recorded = max(n, 1) }
}

// StampedIDs writes the moment the sandbox started into every id it gives (R-mij0b7s0-5001
// rather than R-5001), in base 36 milliseconds. A sandbox keeps what it committed in memory only,
// while the ledger of the gateway in front of it outlives a restart: without the stamp, a
// restarted demo would give its first refund the id of a refund the ledger already records.
func StampedIDs(started time.Time) Option {
	return func(s *Sandbox) { s.idStamp = strconv.FormatInt(started.UnixMilli(), 36) + "-" }
}

// newID is a resource's id: its letter, the stamp and its number. The caller holds s.mu.
func (s *Sandbox) newID(letter string, n int) string {
	return letter + "-" + s.idStamp + strconv.Itoa(n)
}

// New returns an empty sandbox with no faults.
func New(opts ...Option) *Sandbox {
	s := &Sandbox{
		release:    make(chan struct{}),
		ticketKeys: make(map[string]storedReply),
		nextTicket: 1001,
		nextRefund: 5001,
		nextEmail:  1,
		recorded:   maxRecorded,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// call is what a resource handler sees of a request: the body is already read, so faults can
// be applied around the handler without it knowing.
type call struct {
	r    *http.Request
	body []byte
	id   string // the {id} path segment, when the route has one
}

// reply is a resource handler's answer, held back until the post-commit faults have had their
// say about whether the caller gets to see it.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// ServeHTTP routes a request, records it, and applies any matching fault around the handler.
func (s *Sandbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	p := cleanPath(r.URL.Path)
	rt := s.route(r.Method, p)
	f := s.arrive(r, p, body, rt.resource != nil)

	switch {
	case readErr != nil:
		var tooBig *http.MaxBytesError
		if errors.As(readErr, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
		} else {
			writeError(w, http.StatusBadRequest, "cannot read request body")
		}
	case rt.allow != "":
		w.Header().Set("Allow", rt.allow)
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	case rt.control != nil:
		rt.control(w, r, body)
	case rt.resource != nil:
		s.serveResource(w, r, f, func() reply {
			rep := rt.resource(call{r: r, body: body, id: rt.id})
			if r.Method != http.MethodGet {
				if err := s.persist(); err != nil {
					// What was committed is in memory, but would be forgotten at a restart:
					// the caller must not count on it.
					return reply{status: http.StatusInternalServerError, header: http.Header{"Content-Type": {"application/json"}},
						body: []byte(`{"error":"sandbox: cannot keep its records: ` + jsonEscape(err.Error()) + `"}`)}
				}
			}
			return rep
		})
	default:
		writeError(w, http.StatusNotFound, "not found")
	}
}

// arrive records the request and, for resource paths, takes the fault that applies to it. Both
// happen under one lock so that arrival order and fault consumption agree.
func (s *Sandbox) arrive(r *http.Request, p string, body []byte, resource bool) *Fault {
	h := make(http.Header)
	for _, k := range RecordedHeaders {
		if v := r.Header.Values(k); len(v) > 0 {
			h[k] = append([]string(nil), v...)
		}
	}
	req := Request{Method: r.Method, Path: p, Query: r.URL.RawQuery, Header: h, Body: body, At: time.Now()}

	s.mu.Lock()
	defer s.mu.Unlock()
	var f *Fault
	if resource {
		f = s.takeFaultLocked(r.Method, p)
		if f != nil {
			req.Fault = f.Mode
		}
	}
	if len(s.requests) >= s.recorded {
		// Copy rather than reslice so the dropped entries can be garbage collected.
		s.requests = append(s.requests[:0:0], s.requests[len(s.requests)-s.recorded+1:]...)
	}
	s.requests = append(s.requests, req)
	return f
}

// Requests returns, in arrival order, the recorded requests whose path starts with pathPrefix
// ("" for all). Only the most recent 10000 requests are kept (see RecordRequests).
func (s *Sandbox) Requests(pathPrefix string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if strings.HasPrefix(r.Path, pathPrefix) {
			r.Header = r.Header.Clone()
			r.Body = append([]byte(nil), r.Body...)
			out = append(out, r)
		}
	}
	return out
}

// Committed returns how many side effects of one kind were actually committed: "tickets",
// "refunds", "emails" or "closes". Any other kind counts 0.
func (s *Sandbox) Committed(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committedLocked()[kind]
}

func (s *Sandbox) committedLocked() map[string]int {
	return map[string]int{
		"tickets": len(s.tickets),
		"refunds": len(s.refunds),
		"emails":  len(s.emails),
		"closes":  s.closes,
	}
}

// serveStats answers GET /_stats with the counts tests and demo users look at.
func (s *Sandbox) serveStats(w http.ResponseWriter, _ *http.Request, _ []byte) {
	s.mu.Lock()
	out := map[string]any{
		"committed":      s.committedLocked(),
		"requests":       len(s.requests),
		"faults_applied": s.applied,
		"active_faults":  len(s.faults),
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// cleanPath drops one trailing slash so "/tickets/" routes like "/tickets".
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

// decodeObject parses a JSON object body into v. Its errors never quote the body, so a
// sensitive value such as a card number cannot leak into an error message.
func decodeObject(body []byte, v any) error {
	if len(strings.TrimSpace(string(body))) == 0 || strings.TrimSpace(string(body))[0] != '{' {
		return errors.New("request body must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return errors.New("field " + te.Field + " has the wrong type")
		}
		return errors.New("request body is not valid JSON")
	}
	return nil
}

// referenceOf is the reference a created resource is recorded with: the downstream key the
// request carries (docs/STATES.md), which outlives the record of the operation in a ledger that lost
// it, or, from a gateway that sends none, the operation id.
func referenceOf(r *http.Request) string {
	if dk := r.Header.Get("X-Idemgate-Downstream-Key"); dk != "" {
		return dk
	}
	return r.Header.Get("X-Idemgate-Operation")
}

// findByReference answers a resource list's GET, the caller holding the lock: with
// ?reference=, the first item whose downstream key or operation it names (keys of returns
// them); without it, every item, under list.
func findByReference[T any](c call, list string, items []T, keys func(T) (reference, operation string)) reply {
	q := c.r.URL.Query()
	if !q.Has("reference") {
		return jsonReply(http.StatusOK, map[string]any{list: items})
	}
	ref := q.Get("reference")
	for _, it := range items {
		if reference, operation := keys(it); refersTo(ref, reference, operation) {
			return jsonReply(http.StatusOK, it)
		}
	}
	return errorReply(http.StatusNotFound, "not found")
}

// refersTo reports whether a look-up's ?reference= names a resource recorded with reference
// and operation: look-ups may name either.
func refersTo(ref, reference, operation string) bool {
	return ref != "" && (ref == reference || ref == operation)
}

// jsonReply builds a reply with a JSON body.
func jsonReply(status int, v any) reply {
	b, err := json.Marshal(v)
	if err != nil {
		// Only the sandbox's own types are marshalled, so this is a programming error.
		panic("sandbox: marshal reply: " + err.Error())
	}
	return reply{status: status, header: http.Header{"Content-Type": {"application/json"}}, body: append(b, '\n')}
}

// errorReply builds the JSON error body every failure uses: {"error": msg}.
func errorReply(status int, msg string) reply {
	return jsonReply(status, map[string]string{"error": msg})
}

func writeReply(w http.ResponseWriter, rep reply) {
	for k, v := range rep.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

func writeJSON(w http.ResponseWriter, status int, v any) { writeReply(w, jsonReply(status, v)) }

func writeError(w http.ResponseWriter, status int, msg string) {
	writeReply(w, errorReply(status, msg))
}

// jsonEscape is s as the inside of a JSON string.
func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
