// Package handlers holds the thin HTTP handlers: the agent JSON API (api*.go), the Model
// Context Protocol server (mcp*.go), the review console's pages and forms (console*.go), the
// public problem-type pages, and the service endpoints. Each binds and validates input, makes
// one call into models or jobs, and renders JSON or a templ page from views; errors are
// returned, and the one table in problem.go turns them into problem details for programs and
// pages for people. The signed-in user and the API principal arrive on the request context,
// set by web's middleware; handlers never import web.
//
// The subpackages are the helpers only handlers use: problems (the problem types), headers
// (Idempotency-Key and Prefer), opview (the operation's JSON) and export (audit exports).
package handlers
