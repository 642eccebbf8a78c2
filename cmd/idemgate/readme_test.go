package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeDemo runs the commands of the README's "Five minutes with the demo", in the
// README's order, against `serve --demo` on a fresh SQLite ledger, and checks every outcome the
// section promises: each answer's status and state, the attempts, the timeline's events and the
// sandbox's counts. The commands are read from README.md itself, so an edit there that the
// product does not bear out fails here. Then it restarts the demo on the same ledger and checks
// that the sandbox kept its records beside the ledger (step 1 again is a replay, the counts
// unchanged) and does not give a new refund an id the ledger already records.
func TestReadmeDemo(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	section := markdownSection(t, string(readme), "## Five minutes with the demo")
	var cmds []string
	for _, block := range fencedBlocks(section, "sh") {
		cmds = append(cmds, splitCommands(t, block)...)
	}

	dsn := testdb.DSN(t, models.SQLite)
	s := startServe(t, dsn)
	w := &demoWalk{t: t, s: s, vars: map[string]string{},
		client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}}

	steps := demoSteps()
	require.Len(t, cmds, len(steps), "the README's demo has %d commands, this test checks %d:\n%s",
		len(cmds), len(steps), strings.Join(cmds, "\n"))
	for i, raw := range cmds {
		step := steps[i]
		words := shellWords(t, raw, w.vars)
		t.Logf("step %d: %s", i+1, strings.Join(words, " "))
		if name, value, ok := strings.Cut(words[0], "="); ok && len(words) == 1 {
			require.Equal(t, step.want, name+"=", "command %d of the README: %s", i+1, raw)
			require.True(t, strings.HasSuffix(value, "..."), "%s is a placeholder for the reader to fill in: %s", name, raw)
			w.vars[name] = step.value(w)
			continue
		}
		req := w.curl(words)
		route := req.URL.Path
		if w.lost != "" { // the step is named by its route, not by the id in it
			route = strings.Replace(route, w.lost, "{id}", 1)
		}
		require.Equal(t, step.want, req.Method+" "+route, "command %d of the README: %s", i+1, raw)
		a := w.send(req)
		step.check(t, w, a)
	}
	stepRefund := w.refundIDs

	// A restart (issue 50 item 13): the ledger keeps its refunds, and so does the sandbox, in a
	// file beside the ledger: the README's step 1, sent again, is a replay, and the sandbox
	// still counts the refunds it made (it forgot them, and counted none). Its ids must not
	// repeat either way.
	refundsBefore := w.committed("refunds")
	s.stop(t)
	again := startServe(t, dsn)
	w.s = again
	assert.Equal(t, refundsBefore, w.committed("refunds"), "the restarted sandbox counts what it made before")
	step1 := `{"tool":"refunds.issue","params":{"order_id":"1042","amount_cents":1999,"currency":"EUR"}}`
	replay, err := http.NewRequest(http.MethodPost, again.url+"/v1/operations", strings.NewReader(step1))
	require.NoError(t, err)
	replay.Header.Set("Authorization", "Bearer "+again.apiKey)
	replay.Header.Set("Idempotency-Key", "order-1042:refund")
	replay.Header.Set("Content-Type", "application/json")
	r := w.send(replay)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	assert.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	assert.Equal(t, refundsBefore, w.committed("refunds"), "a replay sends nothing")
	body := `{"tool":"refunds.issue","params":{"order_id":"1044","amount_cents":700,"currency":"EUR"}}`
	req, err := http.NewRequest(http.MethodPost, again.url+"/v1/operations", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+again.apiKey)
	req.Header.Set("Idempotency-Key", "order-1044:refund")
	a := w.send(req)
	require.Equal(t, http.StatusCreated, a.status, string(a.body))
	op := decodeOp(t, a.body)
	require.Equal(t, "SUCCEEDED", op.State)
	require.Len(t, stepRefund, 2, "the walkthrough made two refunds")
	assert.NotContains(t, stepRefund, op.DownstreamRef, "a restarted sandbox gave an id the ledger already holds")
	assert.Equal(t, refundsBefore+1, w.committed("refunds"))
	again.stop(t)
}

// demoStep is what the README promises of one of its demo commands.
type demoStep struct {
	want  string                                    // "METHOD /path" of a curl command, or "NAME=" of an assignment
	value func(w *demoWalk) string                  // an assignment's value, which the reader fills in
	check func(t *testing.T, w *demoWalk, a answer) // a curl command's promised outcome
}

// demoSteps follows the README's steps 1 to 5.
func demoSteps() []demoStep {
	refund := func(t *testing.T, w *demoWalk, a answer, status int, refunds int) operationView {
		t.Helper()
		require.Equal(t, status, a.status, string(a.body))
		op := decodeOp(t, a.body)
		assert.Equal(t, "SUCCEEDED", op.State, string(a.body))
		assert.Equal(t, 1, op.Attempts, "one attempt: nothing is sent twice")
		assert.Equal(t, refunds, w.committed("refunds"), "refunds the sandbox made")
		return op
	}
	return []demoStep{
		{want: "KEY=", value: func(w *demoWalk) string { return w.s.apiKey }},
		// 1. A refund.
		{want: "POST /v1/operations", check: func(t *testing.T, w *demoWalk, a answer) {
			op := refund(t, w, a, http.StatusCreated, 1)
			w.first = a.body
			w.refundIDs = append(w.refundIDs, op.DownstreamRef)
		}},
		// 2. The same request again: a replay; then the sandbox's count; then other params.
		{want: "POST /v1/operations", check: func(t *testing.T, w *demoWalk, a answer) {
			refund(t, w, a, http.StatusOK, 1)
			assert.Equal(t, "true", a.header.Get("Idempotent-Replayed"))
			assert.JSONEq(t, string(w.first), string(a.body), "the answer recorded the first time")
		}},
		{want: "GET /sandbox/_stats", check: func(t *testing.T, w *demoWalk, a answer) {
			require.Equal(t, http.StatusOK, a.status, string(a.body))
			assert.Equal(t, 1, statsOf(t, a.body)["refunds"], string(a.body))
		}},
		{want: "POST /v1/operations", check: func(t *testing.T, w *demoWalk, a answer) {
			require.Equal(t, http.StatusUnprocessableEntity, a.status, string(a.body))
			var p struct{ Type string }
			require.NoError(t, json.Unmarshal(a.body, &p))
			assert.Equal(t, "/problems/idempotency-key-mismatch", p.Type)
			assert.Equal(t, 1, w.committed("refunds"), "nothing ran")
		}},
		// 3. The answer is lost after the refund was made.
		{want: "PUT /sandbox/_faults", check: func(t *testing.T, w *demoWalk, a answer) {
			require.Equal(t, http.StatusCreated, a.status, string(a.body))
		}},
		{want: "POST /v1/operations", check: func(t *testing.T, w *demoWalk, a answer) {
			op := refund(t, w, a, http.StatusCreated, 2)
			w.lost = op.ID
			w.refundIDs = append(w.refundIDs, op.DownstreamRef)
		}},
		// 4. The timeline of step 3's operation.
		{want: "ID=", value: func(w *demoWalk) string { return w.lost }},
		{want: "GET /v1/operations/{id}/events", check: func(t *testing.T, w *demoWalk, a answer) {
			require.Equal(t, http.StatusOK, a.status, string(a.body))
			var list struct {
				Events []struct {
					Type      string
					FromState *string `json:"from_state"`
					ToState   *string `json:"to_state"`
					Detail    map[string]any
				}
			}
			require.NoError(t, json.Unmarshal(a.body, &list))
			var got []string
			for _, e := range list.Events {
				line := e.Type
				if e.FromState != nil || e.ToState != nil {
					line += fmt.Sprintf(" %s→%s", deref(e.FromState), deref(e.ToState))
				}
				if c, ok := e.Detail["class"]; ok {
					line += fmt.Sprintf(" (%v)", c)
				}
				got = append(got, line)
			}
			assert.Equal(t, []string{
				"created →RUNNING",
				"policy_decided",
				"attempt_started",
				"attempt_finished (ambiguous)",
				"state_changed RUNNING→UNKNOWN",
				"reconcile_started",
				"reconcile_finished UNKNOWN→SUCCEEDED",
			}, got, string(a.body))
		}},
		// 5. A safe retry.
		{want: "PUT /sandbox/_faults", check: func(t *testing.T, w *demoWalk, a answer) {
			require.Equal(t, http.StatusCreated, a.status, string(a.body))
			var f struct{ Faults []map[string]any }
			require.NoError(t, json.Unmarshal(a.body, &f))
			assert.Len(t, f.Faults, 1, "PUT replaced step 3's fault: %s", a.body)
		}},
		{want: "POST /v1/operations", check: func(t *testing.T, w *demoWalk, a answer) {
			require.Equal(t, http.StatusCreated, a.status, string(a.body))
			op := decodeOp(t, a.body)
			assert.Equal(t, "SUCCEEDED", op.State, string(a.body))
			assert.Equal(t, 2, op.Attempts, "retried once, with the same key")
		}},
		{want: "GET /sandbox/_stats", check: func(t *testing.T, w *demoWalk, a answer) {
			require.Equal(t, http.StatusOK, a.status, string(a.body))
			assert.Equal(t, 1, statsOf(t, a.body)["tickets"], "one ticket for two attempts: %s", a.body)
		}},
		{want: "DELETE /sandbox/_faults", check: func(t *testing.T, w *demoWalk, a answer) {
			require.Equal(t, http.StatusOK, a.status, string(a.body))
			st := w.get("/sandbox/_stats")
			var s struct {
				ActiveFaults int `json:"active_faults"`
			}
			require.NoError(t, json.Unmarshal(st.body, &s))
			assert.Zero(t, s.ActiveFaults, string(st.body))
		}},
	}
}

// demoWalk is the state of one run through the README's demo.
type demoWalk struct {
	t         *testing.T
	s         *server
	client    *http.Client
	vars      map[string]string // the shell variables the README sets
	first     []byte            // step 1's answer
	lost      string            // step 3's operation id
	refundIDs []string          // the ids of the refunds the sandbox made
}

// curl turns a curl command of the README into the request it sends, to this test's server.
// It knows only the options the README uses, and fails on any other.
func (w *demoWalk) curl(words []string) *http.Request {
	t := w.t
	require.Equal(t, "curl", words[0], "the README's demo runs curl")
	method, target, body := "", "", ""
	header := http.Header{}
	for i := 1; i < len(words); i++ {
		arg := words[i]
		next := func() string {
			i++
			require.Less(t, i, len(words), "%s needs a value", arg)
			return words[i]
		}
		switch arg {
		case "-s", "-i", "-si":
		case "-X":
			method = next()
		case "-H":
			k, v, ok := strings.Cut(next(), ":")
			require.True(t, ok, "header %q", words[i])
			header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		case "-d":
			body = next()
		default:
			require.False(t, strings.HasPrefix(arg, "-"), "curl option %s is not one this test knows", arg)
			require.Empty(t, target, "one URL per command")
			target = arg
		}
	}
	if method == "" {
		method = http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
	}
	if body != "" && header.Get("Content-Type") == "" {
		header.Set("Content-Type", "application/x-www-form-urlencoded") // what curl -d sends
	}
	u, err := url.Parse("http://" + strings.TrimPrefix(target, "http://"))
	require.NoError(t, err)
	require.Equal(t, "localhost:8080", u.Host, "the README's commands address the demo's default address")
	base, err := url.Parse(w.s.url)
	require.NoError(t, err)
	u.Host = base.Host
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u.String(), rd)
	require.NoError(t, err)
	req.Header = header
	return req
}

func (w *demoWalk) send(req *http.Request) answer {
	w.t.Helper()
	resp, err := w.client.Do(req)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(w.t, err)
	return answer{resp.StatusCode, resp.Header, b}
}

func (w *demoWalk) get(path string) answer {
	req, err := http.NewRequest(http.MethodGet, w.s.url+path, nil)
	require.NoError(w.t, err)
	return w.send(req)
}

// committed is the sandbox's count of committed resources of a kind.
func (w *demoWalk) committed(kind string) int {
	return statsOf(w.t, w.get("/sandbox/_stats").body)[kind]
}

func statsOf(t *testing.T, body []byte) map[string]int {
	var st struct {
		Committed map[string]int `json:"committed"`
	}
	require.NoError(t, json.Unmarshal(body, &st), string(body))
	return st.Committed
}

// operationView is what the walkthrough reads of an operation.
type operationView struct {
	ID            string
	State         string
	Attempts      int
	DownstreamRef string `json:"downstream_ref"`
}

func decodeOp(t *testing.T, body []byte) operationView {
	var op operationView
	require.NoError(t, json.Unmarshal(body, &op), string(body))
	return op
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// markdownSection is the text under heading, up to the next heading of the same level.
func markdownSection(t *testing.T, md, heading string) string {
	t.Helper()
	i := strings.Index(md, "\n"+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "README.md has no %q", heading)
	rest := md[i+len(heading)+2:]
	level := heading[:strings.Index(heading, " ")+1]
	if j := strings.Index(rest, "\n"+level); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// fencedBlocks are the contents of the ```lang blocks of md, in order.
func fencedBlocks(md, lang string) []string {
	var out []string
	var cur *strings.Builder
	for line := range strings.Lines(md) {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```"+lang:
			cur = &strings.Builder{}
		case cur != nil && trimmed == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return out
}

// splitCommands splits a shell block into its commands: a command ends at a newline outside
// quotes that no backslash continues; comments are dropped.
func splitCommands(t *testing.T, block string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	var quote rune
	atWordStart := true
	rs := []rune(block)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote = r
			cur.WriteRune(r)
		case r == '\\' && i+1 < len(rs) && rs[i+1] == '\n':
			i++
			cur.WriteRune(' ')
		case r == '#' && atWordStart:
			for i+1 < len(rs) && rs[i+1] != '\n' {
				i++
			}
		case r == '\n':
			if c := strings.TrimSpace(cur.String()); c != "" {
				out = append(out, c)
			}
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
		atWordStart = r == ' ' || r == '\t' || r == '\n'
	}
	require.Zero(t, quote, "a quote is left open in:\n%s", block)
	if c := strings.TrimSpace(cur.String()); c != "" {
		out = append(out, c)
	}
	return out
}

// shellWords splits one command into words as a POSIX shell would for the commands the README
// uses: single quotes keep everything, double quotes and bare words expand $NAME from vars.
func shellWords(t *testing.T, cmd string, vars map[string]string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	rs := []rune(cmd)
	expand := func(i int) int { // rs[i] == '$'; returns the index of the name's last rune
		j := i + 1
		for j < len(rs) && (rs[j] == '_' || rs[j] >= 'A' && rs[j] <= 'Z' || rs[j] >= 'a' && rs[j] <= 'z' || rs[j] >= '0' && rs[j] <= '9') {
			j++
		}
		name := string(rs[i+1 : j])
		v, ok := vars[name]
		require.True(t, ok, "$%s is used before the README sets it: %s", name, cmd)
		cur.WriteString(v)
		return j - 1
	}
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case quote == '"':
			switch r {
			case '"':
				quote = 0
			case '$':
				i = expand(i)
			default:
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '$':
			i, inWord = expand(i), true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			require.NotContains(t, "|&;<>()`\\*?", string(r), "shell syntax this test does not follow: %s", cmd)
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	require.NotEmpty(t, words, cmd)
	return words
}

// The demo's tools that take a ticket id accept the stamped ids the demo's sandbox gives, so a
// ticket the demo made can be read and closed (its compensation).
func TestDemoTicketIDsAreAccepted(t *testing.T) {
	s := startServe(t, testdb.DSN(t, models.SQLite))
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	post := func(key, body string) operationView {
		req, err := http.NewRequest(http.MethodPost, s.url+"/v1/operations", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+s.apiKey)
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Less(t, resp.StatusCode, 300, string(b))
		return decodeOp(t, b)
	}
	made := post("t-1:create", `{"tool":"tickets.create","params":{"subject":"stamped"}}`)
	require.Equal(t, "SUCCEEDED", made.State)
	require.Regexp(t, `^T-[0-9a-z]+-1001$`, made.DownstreamRef, "a stamped id")
	closed := post("t-1:close", `{"tool":"tickets.close","params":{"ticket_id":"`+made.DownstreamRef+`","reason":"done"}}`)
	assert.Equal(t, "SUCCEEDED", closed.State)
	s.stop(t)
}
