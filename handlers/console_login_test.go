package handlers_test

import (
	"testing"

	"github.com/idemgate/idemgate/handlers"
	"github.com/stretchr/testify/assert"
)

func TestSafeNextKeepsOnlySameOriginPaths(t *testing.T) {
	t.Parallel()
	for next, want := range map[string]string{
		"/":                            "/",
		"/operations?state=UNKNOWN":    "/operations?state=UNKNOWN",
		"/operations/op_1#timeline":    "/operations/op_1#timeline",
		"/workflows/wf%2F1":            "/workflows/wf%2F1",
		"":                             "/",
		"operations":                   "/",
		"//evil.example/path":          "/",
		"/\\evil.example":              "/",
		"/%0d%0aSet-Cookie:x":          "/%0d%0aSet-Cookie:x", // escaped: a path, not a header
		"/\r\nSet-Cookie: x":           "/",
		"https://evil.example/":        "/",
		"javascript:alert(1)":          "/",
		"/login":                       "/",
		"/logout":                      "/",
		"/login?next=//evil.example":   "/",
		"/\tevil":                      "/",
		"/ok/../../still-a-local-path": "/ok/../../still-a-local-path",
	} {
		assert.Equal(t, want, handlers.SafeNext(next), "%q", next)
	}
}
