package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The fault modes. The "_after_commit" modes commit the side effect first: they are the
// ambiguous outcomes idemgate exists to handle, where the caller cannot tell what happened.
const (
	ModeDelay            = "delay"              // sleep Delay, then process normally
	ModeDropAfterCommit  = "drop_after_commit"  // commit, then close the connection unanswered
	ModeErrorAfterCommit = "error_after_commit" // commit, then answer 500
	ModeError            = "error"              // answer 500, commit nothing
	ModeThrottle         = "throttle"           // answer 429 with Retry-After, commit nothing
	ModeUnavailable      = "unavailable"        // answer 503, commit nothing
	ModeHang             = "hang"               // commit nothing, hold the request, close unanswered
	ModeHangAfterCommit  = "hang_after_commit"  // commit, then hold like hang
	ModeReject           = "reject"             // answer 422, commit nothing
)

var modes = []string{
	ModeDelay, ModeDropAfterCommit, ModeErrorAfterCommit, ModeError, ModeThrottle,
	ModeUnavailable, ModeHang, ModeHangAfterCommit, ModeReject,
}

// maxHang bounds a hang without a Delay, so a client that never gives up cannot hold a
// handler, and with it a gateway's graceful shutdown, forever.
const maxHang = 5 * time.Minute

// Fault makes the next matching requests to the resource paths misbehave.
type Fault struct {
	Mode   string // one of the Mode constants
	Path   string // path prefix, matched on whole segments ("/refunds"); "" matches every resource path
	Method string // optional: only requests with this method ("POST"); "" matches any
	Count  int    // apply to the next Count matching requests; 0 applies until cleared
	// Delay is the sleep of ModeDelay, and for the hang modes how long to hold the request
	// before closing it (0: until the client gives up).
	Delay      time.Duration
	RetryAfter int // seconds in Retry-After: throttle defaults to 1, unavailable sends it only if > 0
}

// activeFault is a queued fault with its remaining budget.
type activeFault struct {
	Fault
	left    int // remaining applications when Count > 0
	applied int
}

func (f Fault) validate() error {
	known := false
	for _, m := range modes {
		known = known || f.Mode == m
	}
	switch {
	case !known:
		return fmt.Errorf("unknown fault mode %q (want one of %s)", f.Mode, strings.Join(modes, ", "))
	case f.Count < 0:
		return errors.New("count must be >= 0")
	case f.Delay < 0:
		return errors.New("delay must be >= 0")
	case f.Mode == ModeDelay && f.Delay == 0:
		return errors.New("mode delay needs a delay")
	case f.RetryAfter < 0:
		return errors.New("retry_after must be >= 0")
	}
	return nil
}

func (f Fault) matches(method, p string) bool {
	if f.Method != "" && !strings.EqualFold(f.Method, method) {
		return false
	}
	prefix := strings.TrimSuffix(f.Path, "/")
	if prefix == "" {
		return true
	}
	if !strings.HasPrefix(prefix, "/") {
		prefix = "/" + prefix
	}
	// Whole segments only, so "/ticket" does not catch "/tickets".
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// AddFault queues f behind the faults already queued; the first queued fault that matches a
// request applies to it. It panics if f is invalid (an unknown mode, a negative count), since
// only test code calls it and a silently ignored fault would make a test pass for the wrong
// reason.
func (s *Sandbox) AddFault(f Fault) {
	if err := s.addFault(f); err != nil {
		panic("sandbox: AddFault: " + err.Error())
	}
}

func (s *Sandbox) addFault(f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &activeFault{Fault: f, left: f.Count})
	return nil
}

// ClearFaults removes every queued fault and releases the requests that hang faults are
// holding, which then close unanswered as they would have anyway.
func (s *Sandbox) ClearFaults() { s.clearFaults() }

func (s *Sandbox) clearFaults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.faults)
	s.faults = nil
	close(s.release)
	s.release = make(chan struct{})
	return n
}

// Faults returns the queued faults; Count is the remaining number of applications (0 for a
// fault that applies until cleared).
func (s *Sandbox) Faults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Fault, 0, len(s.faults))
	for _, af := range s.faults {
		f := af.Fault
		f.Count = af.left
		out = append(out, f)
	}
	return out
}

// takeFaultLocked returns the first queued fault matching the request and spends one of its
// applications, dropping it when none remain.
func (s *Sandbox) takeFaultLocked(method, p string) *Fault {
	for i, af := range s.faults {
		if !af.matches(method, p) {
			continue
		}
		af.applied++
		s.applied++
		if af.Count > 0 {
			af.left--
			if af.left == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		f := af.Fault
		return &f
	}
	return nil
}

// serveResource runs a resource handler with fault f (nil for none) applied around it.
func (s *Sandbox) serveResource(w http.ResponseWriter, r *http.Request, f *Fault, handle func() reply) {
	if f == nil {
		writeReply(w, handle())
		return
	}
	w.Header().Set("X-Sandbox-Fault", f.Mode)
	switch f.Mode {
	case ModeDelay:
		if !s.hold(r.Context(), f.Delay) {
			// The caller gave up while we slept: like a real server that notices, do not
			// start work nobody is waiting for.
			abortConn(w)
			return
		}
	case ModeError:
		writeError(w, http.StatusInternalServerError, "injected error")
		return
	case ModeThrottle:
		ra := f.RetryAfter
		if ra == 0 {
			ra = 1
		}
		w.Header().Set("Retry-After", strconv.Itoa(ra))
		writeError(w, http.StatusTooManyRequests, "throttled by sandbox")
		return
	case ModeUnavailable:
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
		}
		writeError(w, http.StatusServiceUnavailable, "unavailable")
		return
	case ModeReject:
		writeError(w, http.StatusUnprocessableEntity, "rejected by sandbox")
		return
	case ModeHang:
		s.hold(r.Context(), f.Delay)
		abortConn(w)
		return
	}

	rep := handle() // commits, when the request is valid

	switch f.Mode {
	case ModeDropAfterCommit:
		abortConn(w)
	case ModeErrorAfterCommit:
		writeError(w, http.StatusInternalServerError, "internal error after commit")
	case ModeHangAfterCommit:
		s.hold(r.Context(), f.Delay)
		abortConn(w)
	default:
		writeReply(w, rep)
	}
}

// hold blocks for d (maxHang when d is 0) and reports whether it ran its course; it returns
// false early when the client gives up, and true early when ClearFaults releases it.
func (s *Sandbox) hold(ctx context.Context, d time.Duration) bool {
	s.mu.Lock()
	release := s.release
	s.mu.Unlock()
	if d <= 0 {
		d = maxHang
	}
	var over <-chan time.Time
	if s.after != nil {
		over = s.after(d)
	} else {
		t := time.NewTimer(d)
		defer t.Stop()
		over = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-over:
		return true
	case <-release:
		return true
	}
}

// abortConn closes the client connection without writing a response, so the caller sees EOF
// after its request was sent: the ambiguous outcome of docs/STATES.md.
func abortConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): this panic makes the server reset the stream instead.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// faultJSON is a Fault as /_faults reads and writes it.
type faultJSON struct {
	Mode       string   `json:"mode"`
	Path       string   `json:"path,omitempty"`
	Method     string   `json:"method,omitempty"`
	Count      int      `json:"count"`
	Delay      duration `json:"delay,omitempty"`
	RetryAfter int      `json:"retry_after,omitempty"`
	Applied    *int     `json:"applied,omitempty"`
}

// duration reads "1.5s" or a number of seconds, and writes "1.5s".
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return errors.New("delay: want a duration such as \"1.5s\"")
		}
		*d = duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return errors.New("delay: want a duration such as \"1.5s\"")
	}
	*d = duration(secs * float64(time.Second))
	return nil
}

func (d duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// listFaults answers GET /_faults: {"faults": [...]} with remaining counts.
func (s *Sandbox) listFaults(w http.ResponseWriter, _ *http.Request, _ []byte) {
	writeJSON(w, http.StatusOK, map[string]any{"faults": s.faultsJSON()})
}

func (s *Sandbox) faultsJSON() []faultJSON {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]faultJSON, 0, len(s.faults))
	for _, af := range s.faults {
		applied := af.applied
		out = append(out, faultJSON{
			Mode: af.Mode, Path: af.Path, Method: af.Method, Count: af.left,
			Delay: duration(af.Delay), RetryAfter: af.RetryAfter, Applied: &applied,
		})
	}
	return out
}

// putFaults answers PUT /_faults: the faults given (one object or an array) replace every
// queued fault, as a PUT replaces what its URL names, so running the same command twice
// leaves the same faults queued. Requests held by hang faults are released, as by DELETE.
func (s *Sandbox) putFaults(w http.ResponseWriter, _ *http.Request, body []byte) {
	s.queueFaults(w, body, true)
}

// postFaults answers POST /_faults: the faults given are queued behind those already queued.
func (s *Sandbox) postFaults(w http.ResponseWriter, _ *http.Request, body []byte) {
	s.queueFaults(w, body, false)
}

// queueFaults reads one fault object or an array of them and queues them, after clearing the
// queue when replace is set. Either all of them are queued or, on any invalid one, none, and
// nothing is cleared.
func (s *Sandbox) queueFaults(w http.ResponseWriter, body []byte, replace bool) {
	var in []faultJSON
	var err error
	if strings.HasPrefix(strings.TrimSpace(string(body)), "[") {
		err = json.Unmarshal(body, &in)
	} else {
		in = make([]faultJSON, 1)
		err = json.Unmarshal(body, &in[0])
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid fault: "+err.Error())
		return
	}
	faults := make([]Fault, len(in))
	for i, fj := range in {
		faults[i] = Fault{
			Mode: fj.Mode, Path: fj.Path, Method: strings.ToUpper(fj.Method), Count: fj.Count,
			Delay: time.Duration(fj.Delay), RetryAfter: fj.RetryAfter,
		}
		if err := faults[i].validate(); err != nil {
			writeError(w, http.StatusBadRequest, "invalid fault: "+err.Error())
			return
		}
	}
	if replace {
		s.clearFaults()
	}
	for _, f := range faults {
		_ = s.addFault(f) // already validated
	}
	writeJSON(w, http.StatusCreated, map[string]any{"faults": s.faultsJSON()})
}

// deleteFaults answers DELETE /_faults by clearing every fault.
func (s *Sandbox) deleteFaults(w http.ResponseWriter, _ *http.Request, _ []byte) {
	writeJSON(w, http.StatusOK, map[string]int{"cleared": s.clearFaults()})
}
