package sandbox

import (
	"html/template"
	"net/http"
	"slices"
)

// usage is the short manual, shown on the page and at GET /_help. Paths are relative to the
// sandbox root, which the gateway serves under /sandbox/.
const usage = `idemgate sandbox: a fake downstream that commits side effects and fails on demand.

Resources (faults apply to these):
  POST /tickets              {"subject", "body"?, "priority"?}   honours Idempotency-Key
  GET  /tickets?reference=R  the ticket created under downstream key R (X-Idemgate-Downstream-Key)
                             or by operation R (X-Idemgate-Operation), or 404
  GET  /tickets/{id}         POST /tickets/{id}/close {"reason"}  (closing twice is harmless)
  POST /refunds              {"order_id", "amount_cents", "currency", "card_number"?}
                             ignores Idempotency-Key: every request pays out again
  GET  /refunds?reference=ID GET /refunds/{id}
  POST /emails               {"to", "subject", "body"}   no key support, no lookup

Control:
  PUT    /_faults  {"mode", "path"?, "method"?, "count"?, "delay"?, "retry_after"?}
                   replaces every queued fault with this one (or an array of them);
                   the first queued fault that matches a request applies to it;
                   count 0 = until cleared; no method = every method, so a fault on
                   POST /refunds needs "method":"POST" (the gateway looks refunds up
                   with GET /refunds?reference=... before it sends one)
  POST   /_faults  the same body, queued behind the faults already queued
  GET    /_faults  list active faults      DELETE /_faults  clear them all
  GET    /_stats   committed counts        GET /_help       this text

Fault modes:
  delay               sleep "delay", then process normally
  drop_after_commit   commit, then close the connection without answering
  error_after_commit  commit, then answer 500
  error               answer 500, commit nothing
  throttle            answer 429 with Retry-After (default 1), commit nothing
  unavailable         answer 503 (Retry-After if retry_after > 0), commit nothing
  hang                commit nothing; hold until the client gives up (or "delay"), then close
  hang_after_commit   commit, then hold like hang
  reject              answer 422, commit nothing

Example, through the gateway: the next refund is committed and its answer lost
  curl -X PUT <gateway>/sandbox/_faults -d '{"mode":"drop_after_commit","path":"/refunds","method":"POST","count":1}'
`

// pageLimit bounds each table on the page; the JSON lists carry everything.
const pageLimit = 100

// pageTmpl is deliberately plain: no scripts, no external assets, so it works offline and
// under a strict Content-Security-Policy.
var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>idemgate sandbox</title>
<style>
body{font-family:system-ui,sans-serif;margin:2rem;max-width:70rem}
table{border-collapse:collapse;margin-bottom:1.5rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;font-size:.9rem}
pre{background:#f4f4f4;padding:1rem;overflow-x:auto}
</style></head><body>
<h1>idemgate sandbox</h1>
<p>Committed: {{.Committed.tickets}} tickets, {{.Committed.closes}} closes, {{.Committed.refunds}} refunds,
{{.Committed.emails}} emails. {{.Requests}} requests received. <a href="_stats">stats</a> ·
<a href="_faults">faults</a> · <a href="_help">help</a></p>
{{if .Reference}}<p data-testid="sandbox-reference"><strong>Reference {{.Reference}}:</strong> {{.Found}} found
{{- if not .Found}}: nothing was created with this reference{{end}}. Only what has it is listed. <a href="./">Show everything</a></p>{{end}}

<h2>Active faults</h2>
{{if .Faults}}<table><tr><th>mode</th><th>path</th><th>method</th><th>remaining</th><th>delay</th><th>retry after</th></tr>
{{range .Faults}}<tr><td>{{.Mode}}</td><td>{{or .Path "(all)"}}</td><td>{{or .Method "(any)"}}</td>
<td>{{if .Count}}{{.Count}}{{else}}until cleared{{end}}</td><td>{{if .Delay}}{{.Delay}}{{end}}</td>
<td>{{if .RetryAfter}}{{.RetryAfter}}s{{end}}</td></tr>
{{end}}</table>{{else}}<p>None.</p>{{end}}

<h2>Tickets</h2>
{{if .Tickets}}<table><tr><th>id</th><th>status</th><th>subject</th><th>priority</th><th>reference</th><th>created (UTC)</th></tr>
{{range .Tickets}}<tr><td>{{.ID}}</td><td>{{.Status}}</td><td>{{.Subject}}</td><td>{{.Priority}}</td>
<td>{{.Reference}}</td><td>{{.CreatedAt.Format "15:04:05.000"}}</td></tr>
{{end}}</table>{{else}}<p>None yet.</p>{{end}}

<h2>Refunds</h2>
{{if .Refunds}}<table><tr><th>id</th><th>order</th><th>amount</th><th>card</th><th>reference</th><th>created (UTC)</th></tr>
{{range .Refunds}}<tr><td>{{.ID}}</td><td>{{.OrderID}}</td><td>{{.AmountCents}} {{.Currency}}</td>
<td>{{if .CardLast4}}···· {{.CardLast4}}{{end}}</td><td>{{.Reference}}</td><td>{{.CreatedAt.Format "15:04:05.000"}}</td></tr>
{{end}}</table>{{else}}<p>None yet.</p>{{end}}

<h2>Emails</h2>
{{if .Emails}}<table><tr><th>id</th><th>to</th><th>subject</th><th>reference</th><th>created (UTC)</th></tr>
{{range .Emails}}<tr><td>{{.ID}}</td><td>{{.To}}</td><td>{{.Subject}}</td><td>{{.Reference}}</td>
<td>{{.CreatedAt.Format "15:04:05.000"}}</td></tr>
{{end}}</table>{{else}}<p>None yet.</p>{{end}}

<h2>Usage</h2>
<pre>{{.Usage}}</pre>
</body></html>
`))

// servePage answers GET / with the newest committed resources first; GET /?reference=R lists
// only those created under reference R (a downstream key or operation id), so that a console's
// "Look it up" link opens a page for people, which faults never touch.
func (s *Sandbox) servePage(w http.ResponseWriter, r *http.Request, _ []byte) {
	faults := s.Faults()
	s.mu.Lock()
	// Copy the values under the lock: a ticket may be closed while the page renders.
	data := struct {
		Committed map[string]int
		Requests  int
		Faults    []Fault
		Reference string
		Found     int
		Tickets   []ticket
		Refunds   []refund
		Emails    []email
		Usage     string
	}{
		Committed: s.committedLocked(),
		Requests:  len(s.requests),
		Faults:    faults,
		Tickets:   newest(s.tickets),
		Refunds:   newest(s.refunds),
		Emails:    newest(s.emails),
		Usage:     usage,
	}
	s.mu.Unlock()
	if ref := r.URL.Query().Get("reference"); ref != "" {
		data.Reference = ref
		data.Tickets = slices.DeleteFunc(data.Tickets, func(t ticket) bool { return t.Reference != ref })
		data.Refunds = slices.DeleteFunc(data.Refunds, func(f refund) bool { return f.Reference != ref })
		data.Emails = slices.DeleteFunc(data.Emails, func(e email) bool { return e.Reference != ref })
		data.Found = len(data.Tickets) + len(data.Refunds) + len(data.Emails)
	}

	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	_ = pageTmpl.Execute(w, data) // a failed write means the browser went away
}

// newest copies up to pageLimit items, newest first.
func newest[T any](items []*T) []T {
	out := make([]T, 0, min(len(items), pageLimit))
	for _, it := range slices.Backward(items) {
		if len(out) == pageLimit {
			break
		}
		out = append(out, *it)
	}
	return out
}

// serveUsage answers GET /_help with the usage text.
func serveUsage(w http.ResponseWriter, _ *http.Request, _ []byte) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(usage))
}
