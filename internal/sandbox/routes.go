package sandbox

import (
	"net/http"
	"strings"
)

// routed is the outcome of routing one request. Exactly one of resource, control or allow is
// set, or none when the path is unknown.
type routed struct {
	// resource handles the API paths that faults apply to.
	resource func(call) reply
	// control handles the sandbox's own paths (page, stats, faults), which faults never touch
	// so that a demo user can always see and clear what they injected.
	control func(http.ResponseWriter, *http.Request, []byte)
	id      string // the {id} path segment
	allow   string // the methods the path accepts, when the request's method is not one
}

// route maps a method and a cleaned path to its handler. It is hand-written rather than an
// http.ServeMux so that unknown paths and wrong methods answer in the same JSON shape as
// every other error.
func (s *Sandbox) route(method, p string) routed {
	seg := strings.Split(strings.TrimPrefix(p, "/"), "/")
	type handlers map[string]routed
	var hs handlers
	var id string
	switch {
	case p == "/":
		hs = handlers{"GET": {control: s.servePage}}
	case p == "/_help":
		hs = handlers{"GET": {control: serveUsage}}
	case p == "/_stats":
		hs = handlers{"GET": {control: s.serveStats}}
	case p == "/_faults":
		hs = handlers{
			"GET":    {control: s.listFaults},
			"PUT":    {control: s.putFaults},
			"POST":   {control: s.postFaults},
			"DELETE": {control: s.deleteFaults},
		}
	case p == "/tickets":
		hs = handlers{"GET": {resource: s.findTicket}, "POST": {resource: s.createTicket}}
	case len(seg) == 2 && seg[0] == "tickets":
		hs, id = handlers{"GET": {resource: s.getTicket}}, seg[1]
	case len(seg) == 3 && seg[0] == "tickets" && seg[2] == "close":
		hs, id = handlers{"POST": {resource: s.closeTicket}}, seg[1]
	case p == "/refunds":
		hs = handlers{"GET": {resource: s.findRefund}, "POST": {resource: s.createRefund}}
	case len(seg) == 2 && seg[0] == "refunds":
		hs, id = handlers{"GET": {resource: s.getRefund}}, seg[1]
	case p == "/emails":
		hs = handlers{"POST": {resource: s.createEmail}}
	default:
		return routed{}
	}
	if rt, ok := hs[method]; ok {
		rt.id = id
		return rt
	}
	var allow []string
	for _, m := range []string{"GET", "PUT", "POST", "DELETE"} {
		if _, ok := hs[m]; ok {
			allow = append(allow, m)
		}
	}
	return routed{allow: strings.Join(allow, ", ")}
}
