package netfault_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/idemgate/idemgate/models"
)

// The checker over a run's whole history (issue 48 item 4). Every request an agent sends is
// recorded with what it was answered and when; once the faults heal and the run settles,
// the ledger's record of each key is added as one more observation, and the history is
// checked two ways:
//
//   - Each key's answers agree (porcupine, a per-key model): every answer naming an operation
//     names the same one, every terminal answer (SUCCEEDED or FAILED_FINAL, with its result,
//     error class and downstream reference) is the same, the one the ledger recorded, and
//     once a terminal answer has been given no later answer says the operation is still in
//     progress. Answers that say nothing final (a 5xx, no answer at all, 202, a 409 in
//     progress) are allowed at any point before.
//   - The effects the downstream counted agree with the ledger: no key with two effects, no
//     FAILED_FINAL key with one, no SUCCEEDED key without one, no effect that names no
//     operation; and every key final, or in a person's queue (UNKNOWN with an open review),
//     within the recovery window after the faults heal (settle).

// call is what an agent asked: one key.
type call struct{ Key string }

// answer is what it was told, reduced to what the model compares.
type answer struct {
	Status int
	Err    string // no answer at all: the connection broke or the client gave up
	ID     string // the operation the answer names
	State  string // the operation's state in the answer, when it carries the operation
	// Final is a terminal answer's outcome: state, result, error class and downstream
	// reference; "" when the answer is not terminal.
	Final string
}

// inProgress reports whether the answer says the operation has not ended yet: an operation
// in a non-terminal state, or 409 operation-in-progress.
func (a answer) inProgress() bool {
	return a.Final == "" && a.Err == "" && (a.Status == http.StatusConflict || (a.Status < 300 && a.State != ""))
}

func (a answer) String() string {
	switch {
	case a.Err != "":
		return "no answer (" + a.Err + ")"
	case a.Final != "":
		return fmt.Sprintf("%d %s %s", a.Status, a.ID, a.Final)
	default:
		return fmt.Sprintf("%d %s %s", a.Status, a.ID, a.State)
	}
}

// canonical re-encodes a JSON value so that equal values compare equal as strings.
func canonical(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "null"
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "invalid:" + string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func final(state, result, errorClass, ref string) string {
	return fmt.Sprintf("%s result=%s error=%s ref=%s", state, result, errorClass, ref)
}

// answerOf reads an HTTP answer (err: none came).
func answerOf(status int, body []byte, err error) answer {
	if err != nil {
		return answer{Err: err.Error()}
	}
	a := answer{Status: status}
	var m struct {
		ID          string          `json:"id"`
		OperationID string          `json:"operation_id"` // of a problem about an operation
		State       string          `json:"state"`
		Result      json.RawMessage `json:"result"`
		Error       *struct {
			Class string `json:"class"`
		} `json:"error"`
		DownstreamRef *string `json:"downstream_ref"`
	}
	if json.Unmarshal(body, &m) != nil {
		return a
	}
	if strings.HasPrefix(m.ID, "op_") {
		a.ID = m.ID
	} else if m.OperationID != "" {
		a.ID = m.OperationID
	}
	if status >= 300 || m.State == "" {
		return a
	}
	a.State = m.State
	if models.State(m.State).Terminal() {
		class, ref := "", ""
		if m.Error != nil {
			class = m.Error.Class
		}
		if m.DownstreamRef != nil {
			ref = *m.DownstreamRef
		}
		a.Final = final(m.State, canonical(m.Result), class, ref)
	}
	return a
}

// recorded is the ledger's record of op as a terminal answer would carry it.
func recorded(op *models.Operation) answer {
	a := answer{Status: http.StatusOK, ID: op.ID, State: string(op.State)}
	if op.State.Terminal() {
		result := "null"
		if op.Result != nil {
			result = canonical([]byte(*op.Result))
		}
		a.Final = final(string(op.State), result, deref(op.ErrorClass), deref(op.DownstreamRef))
	}
	return a
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// history is every request of a run with its answer, as porcupine operations.
type history struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func newHistory() *history { return &history{start: time.Now()} }

// add records that client asked key at start and was answered (status, body) or not (err),
// now; it returns the answer as the model reads it.
func (h *history) add(client int, key string, start time.Time, status int, body []byte, err error) answer {
	a := answerOf(status, body, err)
	h.record(client, key, start, time.Now(), a)
	return a
}

func (h *history) record(client int, key string, start, end time.Time, a answer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: call{Key: key},
		Call: start.Sub(h.start).Nanoseconds(), Output: a, Return: end.Sub(h.start).Nanoseconds()})
}

// keyState is the model's state of one key: the operation it names and, once one was given,
// its terminal answer.
type keyState struct{ id, final string }

// perKey is the model: every answer naming an operation names the same one; every terminal
// answer is the same; after one, no answer says the operation is still in progress.
var perKey = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range ops {
			k := op.Input.(call).Key
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(byKey))
		for _, p := range byKey {
			out = append(out, p)
		}
		return out
	},
	Init: func() any { return keyState{} },
	Step: func(state, _, output any) (bool, any) {
		s, a := state.(keyState), output.(answer)
		if a.ID != "" {
			if s.id != "" && s.id != a.ID {
				return false, s
			}
			s.id = a.ID
		}
		if a.Final != "" {
			if s.final != "" && s.final != a.Final {
				return false, s
			}
			s.final = a.Final
		} else if s.final != "" && a.inProgress() {
			return false, s
		}
		return true, s
	},
	DescribeOperation: func(input, output any) string {
		return input.(call).Key + " → " + output.(answer).String()
	},
}

// verdict is what the checker found; the run's figures for docs/RELIABILITY.md.
type verdict struct {
	Requests, Keys, Operations int
	States                     map[models.State]int
	Queued                     int // UNKNOWN with an open review
	Effects                    int
	TwoEffects                 int // keys with more than one effect
	FailedWithEffect           int
	SucceededWithout           int
	Orphans                    int // effects that name no operation of the ledger
	Unsettled                  int
	Inconsistent               int // keys whose answers disagree
}

func (v verdict) String() string {
	states := make([]string, 0, len(v.States))
	for s, n := range v.States {
		states = append(states, fmt.Sprintf("%s=%d", s, n))
	}
	sort.Strings(states)
	return fmt.Sprintf("%d requests, %d keys, %d operations {%s}, %d in a person's queue, %d effects; "+
		"keys with two effects %d, FAILED_FINAL with an effect %d, SUCCEEDED without one %d, effects of no operation %d, "+
		"unsettled %d, keys answered inconsistently %d",
		v.Requests, v.Keys, v.Operations, strings.Join(states, " "), v.Queued, v.Effects,
		v.TwoEffects, v.FailedWithEffect, v.SucceededWithout, v.Orphans, v.Unsettled, v.Inconsistent)
}

// downstream is what the checker needs from a run's downstreams: the effects of the
// operation op (counted by the downstream, not by the gateway) and all effects counted.
type downstream interface {
	effectsOf(op *models.Operation) int
	total() int
}

// operations reads the tenant's whole ledger, page by page.
func operations(ctx context.Context, ledger *models.Ledger, tenant string) ([]*models.Operation, error) {
	var all []*models.Operation
	f := models.ListFilter{Limit: 500}
	for {
		page, more, err := ledger.List(ctx, tenant, f)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if !more || len(page) == 0 {
			return all, nil
		}
		f.Before = page[len(page)-1].ID
	}
}

// settled is what settle waits for: every operation final, or (queue) in a person's queue.
func settledOp(op *models.Operation, queue bool) bool {
	return op.State.Terminal() || (queue && op.State == models.StateUnknown && op.Review != nil && op.Review.Status == models.ReviewOpen)
}

// settlement is the ledger as settle last read it: every operation settled.
type settlement struct {
	at   time.Time // when that read began: the ledger's record is observed then
	took time.Duration
	ops  []*models.Operation
}

// settle waits up to window, from now (the heal), for every operation of the tenant to be
// final, or with queue in a person's queue; took is the recovery time.
func settle(t *testing.T, ledger *models.Ledger, tenant string, window time.Duration, queue bool) settlement {
	t.Helper()
	start := time.Now()
	var last string
	for {
		at := time.Now()
		ops, err := operations(context.Background(), ledger, tenant)
		if err == nil {
			open := map[models.State]int{}
			for _, op := range ops {
				if !settledOp(op, queue) {
					open[op.State]++
				}
			}
			if len(open) == 0 && len(ops) > 0 {
				return settlement{at: at, took: time.Since(start), ops: ops}
			}
			last = fmt.Sprint(len(ops), " operations, not settled: ", open)
		} else {
			last = err.Error()
		}
		if time.Since(start) > window {
			t.Fatalf("not settled within the recovery window of %s after the heal: %s", window, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// check adds the ledger's record of every key, as settle read it, to h and checks the whole
// history and the effects. queue allows UNKNOWN with an open review; otherwise every
// operation must be final. Answers given after the settlement must agree with it. Every
// violation fails t; the verdict is returned for the run's log.
func (h *history) check(t *testing.T, s settlement, down downstream, queue bool) verdict {
	t.Helper()
	ops := s.ops
	v := verdict{States: map[models.State]int{}, Operations: len(ops)}
	keys := map[string]bool{}
	for _, op := range ops {
		h.record(-1, op.Key, s.at, s.at, recorded(op))
		v.States[op.State]++
		n := down.effectsOf(op)
		v.Effects += n
		what := fmt.Sprintf("%s (%s, %s, %d attempts)", op.Key, op.ID, op.State, op.Attempts)
		if n > 1 {
			v.TwoEffects++
			t.Errorf("%s has %d effects downstream", what, n)
		}
		switch {
		case op.State == models.StateFailedFinal && n > 0:
			v.FailedWithEffect++
			t.Errorf("%s is FAILED_FINAL but has %d effects downstream", what, n)
		case op.State == models.StateSucceeded && n == 0:
			v.SucceededWithout++
			t.Errorf("%s is SUCCEEDED but has no effect downstream", what)
		}
		if !settledOp(op, queue) {
			v.Unsettled++
			t.Errorf("%s is not settled", what)
		} else if !op.State.Terminal() {
			v.Queued++
		}
	}
	if total := down.total(); total != v.Effects {
		v.Orphans = total - v.Effects
		t.Errorf("the downstream counted %d effects, the ledger's operations account for %d", total, v.Effects)
	}

	h.mu.Lock()
	hist := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	for _, op := range hist {
		if op.ClientId >= 0 {
			v.Requests++
			keys[op.Input.(call).Key] = true
		}
	}
	v.Keys = len(keys)
	res := porcupine.CheckOperationsTimeout(perKey, hist, time.Minute)
	if res != porcupine.Ok {
		// Name the keys: check each one alone.
		for _, part := range perKey.Partition(hist) {
			if porcupine.CheckOperationsTimeout(perKey, part, 10*time.Second) == porcupine.Ok {
				continue
			}
			v.Inconsistent++
			if v.Inconsistent <= 10 {
				sort.Slice(part, func(i, j int) bool { return part[i].Call < part[j].Call })
				var lines []string
				for _, op := range part {
					lines = append(lines, fmt.Sprintf("  client %d [%s, %s] %s", op.ClientId,
						time.Duration(op.Call).Round(time.Millisecond), time.Duration(op.Return).Round(time.Millisecond), op.Output.(answer)))
				}
				t.Errorf("key %s: answers disagree (%s):\n%s", part[0].Input.(call).Key, res, strings.Join(lines, "\n"))
			}
		}
		if v.Inconsistent == 0 {
			t.Errorf("porcupine: %s over the whole history, though each key alone checks", res)
		}
	}
	return v
}

// answerTimes returns the q-quantiles (0..1) of how long the agents waited for the answers to
// the requests they sent between from and to (the fault), answered or not.
func (h *history) answerTimes(from, to time.Time, qs ...float64) []time.Duration {
	h.mu.Lock()
	var ds []time.Duration
	lo, hi := from.Sub(h.start).Nanoseconds(), to.Sub(h.start).Nanoseconds()
	for _, op := range h.ops {
		if op.ClientId >= 0 && op.Call >= lo && op.Call <= hi {
			ds = append(ds, time.Duration(op.Return-op.Call))
		}
	}
	h.mu.Unlock()
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	out := make([]time.Duration, len(qs))
	for i, q := range qs {
		if len(ds) > 0 {
			out[i] = ds[int(q*float64(len(ds)-1)+0.5)].Round(time.Millisecond)
		}
	}
	return out
}

// probeReadyz asks GET /readyz of every URL urls names, every 500 ms until ctx ends, and
// returns a function giving the slowest answer (or failure to answer) since it was last
// called.
func probeReadyz(ctx context.Context, client *http.Client, urls func() []string) func() time.Duration {
	var mu sync.Mutex
	var slowest time.Duration
	go func() {
		for ctx.Err() == nil {
			for _, u := range urls() {
				start := time.Now()
				if resp, err := client.Get(u + "/readyz"); err == nil {
					resp.Body.Close()
				}
				mu.Lock()
				slowest = max(slowest, time.Since(start))
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		d := slowest
		slowest = 0
		return d.Round(time.Millisecond)
	}
}
